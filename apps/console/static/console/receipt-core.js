/*
 * The receipt mirror's verifier, in the browser: a line-by-line port of the Python
 * reference implementation in apps/receipts/verifier (strict decoding of server.md §1,
 * RFC 8785 canonical bytes, BLAKE3 action_hash, strict Ed25519, trust-level derivation,
 * lifecycle kinds, session chains), of the mirror chain of server.md §3
 * (apps/receipts/mirror_chain.py) and of the approver's byte builders (approval token
 * message, co-sign payloads: apps/approvals/tokens).
 *
 * Nothing here touches the network. Needs blake3.js (window.MirrorBlake3) and WebCrypto.
 *
 * Value model of a parsed text: objects are JObj (their member pairs, repeats kept),
 * numbers are JNum (the literal text), arrays, strings, booleans and null are themselves.
 * Decoded (normalized) objects are null-prototype objects; typed integers are BigInt,
 * free-form numbers are the IEEE doubles the reference hashes.
 */
(function (root) {
  "use strict";

  const blake3 = root.MirrorBlake3;
  const encoder = new TextEncoder();

  // --- Bytes ------------------------------------------------------------------------------

  function utf8(text) {
    return encoder.encode(text);
  }

  function concat() {
    let length = 0;
    for (const part of arguments) length += part.length;
    const out = new Uint8Array(length);
    let offset = 0;
    for (const part of arguments) {
      out.set(part, offset);
      offset += part.length;
    }
    return out;
  }

  function toHex(bytes) {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function fromHex(text) {
    if (!/^(?:[0-9a-fA-F]{2})*$/.test(text)) throw new Error("not hex");
    const out = new Uint8Array(text.length / 2);
    for (let i = 0; i < out.length; i++) out[i] = parseInt(text.substr(2 * i, 2), 16);
    return out;
  }

  function blake3Hex(bytes) {
    return blake3.hex(bytes);
  }

  const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

  function b64encode(bytes) {
    let out = "";
    for (let i = 0; i < bytes.length; i += 3) {
      const n = (bytes[i] << 16) | ((bytes[i + 1] || 0) << 8) | (bytes[i + 2] || 0);
      out += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
      out += i + 1 < bytes.length ? B64[(n >> 6) & 63] : "=";
      out += i + 2 < bytes.length ? B64[n & 63] : "=";
    }
    return out;
  }

  const B64_SHAPE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

  /** Standard padded base64, refusing any spelling that does not re-encode alike. */
  function canonicalB64decode(text) {
    if (typeof text !== "string" || !B64_SHAPE.test(text)) return null;
    const bytes = new Uint8Array((text.length / 4) * 3 - (text.match(/=*$/)[0].length));
    let o = 0;
    for (let i = 0; i < text.length; i += 4) {
      const n =
        (B64.indexOf(text[i]) << 18) |
        (B64.indexOf(text[i + 1]) << 12) |
        ((text[i + 2] === "=" ? 0 : B64.indexOf(text[i + 2])) << 6) |
        (text[i + 3] === "=" ? 0 : B64.indexOf(text[i + 3]));
      if (o < bytes.length) bytes[o++] = (n >> 16) & 255;
      if (o < bytes.length) bytes[o++] = (n >> 8) & 255;
      if (o < bytes.length) bytes[o++] = n & 255;
    }
    return b64encode(bytes) === text ? bytes : null;
  }

  function u64le(value) {
    const out = new Uint8Array(8);
    let v = BigInt(value);
    for (let i = 0; i < 8; i++) {
      out[i] = Number(v & 0xffn);
      v >>= 8n;
    }
    return out;
  }

  function u64be(value) {
    return u64le(value).reverse();
  }

  function u32be(value) {
    return new Uint8Array([(value >>> 24) & 255, (value >>> 16) & 255, (value >>> 8) & 255, value & 255]);
  }

  function lengthPrefixed(bytes) {
    return concat(u64le(bytes.length), bytes);
  }

  // --- Strict JSON text (apps/common/json_text.py via apps/receipts/verifier/receipt_text.py)

  class DecodeError extends Error {}

  class JObj {
    constructor(pairs) {
      this.pairs = pairs;
    }
  }

  class JNum {
    constructor(text) {
      this.text = text;
    }
  }

  const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?:[^\ud800-\udbff]|^)[\udc00-\udfff]/;

  // apps/common/json_text.py: at most 128 nested arrays/objects (serde_json's limit).
  const MAX_DEPTH = 128;
  const tooDeep = () => new DecodeError(`nesting deeper than ${MAX_DEPTH} arrays/objects`);
  const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?/y;

  function parseJson(text) {
    if (text.charCodeAt(0) === 0xfeff) throw new DecodeError("a byte-order mark is not allowed");
    let i = 0;
    const n = text.length;

    function where(at) {
      const before = text.slice(0, at);
      const line = before.split("\n").length;
      const column = at - before.lastIndexOf("\n");
      return ` at line ${line} column ${column}`;
    }
    function fail(message, at) {
      return new DecodeError(message + where(at === undefined ? i : at));
    }
    function ws() {
      while (i < n) {
        const c = text[i];
        if (c === " " || c === "\t" || c === "\n" || c === "\r") i++;
        else break;
      }
    }
    function str() {
      const start = i;
      i++; // opening quote
      let out = "";
      for (;;) {
        if (i >= n) throw fail("Unterminated string starting", start);
        const c = text.charCodeAt(i);
        if (c === 0x22) {
          i++;
          break;
        }
        if (c < 0x20) throw fail("Invalid control character", i);
        if (c !== 0x5c) {
          let j = i;
          while (j < n) {
            const d = text.charCodeAt(j);
            if (d === 0x22 || d === 0x5c || d < 0x20) break;
            j++;
          }
          out += text.slice(i, j);
          i = j;
          continue;
        }
        const e = text[i + 1];
        if (e === undefined) throw fail("Unterminated string starting", start);
        const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };
        if (e in simple) {
          out += simple[e];
          i += 2;
        } else if (e === "u") {
          const h = text.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(h)) throw fail("Invalid \\uXXXX escape", i);
          out += String.fromCharCode(parseInt(h, 16));
          i += 6;
        } else {
          throw fail("Invalid \\escape", i);
        }
      }
      return out;
    }
    function value(depth) {
      ws();
      if (i >= n) throw fail("Expecting value");
      const c = text[i];
      if (c === "{") {
        if (depth >= MAX_DEPTH) throw tooDeep();
        i++;
        const pairs = [];
        ws();
        if (text[i] === "}") {
          i++;
          return new JObj(pairs);
        }
        for (;;) {
          ws();
          if (text[i] !== '"') throw fail("Expecting property name enclosed in double quotes");
          const name = str();
          ws();
          if (text[i] !== ":") throw fail("Expecting ':' delimiter");
          i++;
          pairs.push([name, value(depth + 1)]);
          ws();
          if (text[i] === ",") {
            i++;
            ws();
            if (text[i] !== '"') throw fail("Expecting property name enclosed in double quotes");
            continue;
          }
          if (text[i] === "}") {
            i++;
            return new JObj(pairs);
          }
          throw fail("Expecting ',' delimiter");
        }
      }
      if (c === "[") {
        if (depth >= MAX_DEPTH) throw tooDeep();
        i++;
        const items = [];
        ws();
        if (text[i] === "]") {
          i++;
          return items;
        }
        for (;;) {
          items.push(value(depth + 1));
          ws();
          if (text[i] === ",") {
            i++;
            continue;
          }
          if (text[i] === "]") {
            i++;
            return items;
          }
          throw fail("Expecting ',' delimiter");
        }
      }
      if (c === '"') return str();
      if (text.startsWith("null", i)) {
        i += 4;
        return null;
      }
      if (text.startsWith("true", i)) {
        i += 4;
        return true;
      }
      if (text.startsWith("false", i)) {
        i += 5;
        return false;
      }
      if (text.startsWith("NaN", i)) throw new DecodeError("NaN is not a JSON value");
      if (text.startsWith("Infinity", i)) throw new DecodeError("Infinity is not a JSON value");
      if (text.startsWith("-Infinity", i)) throw new DecodeError("-Infinity is not a JSON value");
      NUMBER.lastIndex = i;
      const match = NUMBER.exec(text);
      if (match) {
        i += match[0].length;
        return new JNum(match[0]);
      }
      throw fail("Expecting value");
    }
    const result = value(0);
    ws();
    if (i !== n) throw fail("Extra data");
    if (text.indexOf("\\u") >= 0 || LONE_SURROGATE.test(text)) checkSurrogates(result);
    return result;
  }

  function checkSurrogates(value) {
    const stack = [value];
    while (stack.length) {
      const item = stack.pop();
      if (typeof item === "string") {
        if (LONE_SURROGATE.test(item)) throw new DecodeError("lone surrogate in a string");
      } else if (item instanceof JObj) {
        for (const [name, member] of item.pairs) {
          if (LONE_SURROGATE.test(name)) throw new DecodeError("lone surrogate in a member name");
          stack.push(member);
        }
      } else if (Array.isArray(item)) {
        for (const member of item) stack.push(member);
      }
    }
  }

  /** Bytes from a file: strict UTF-8, the byte-order mark kept so that it is refused. */
  function decodeUtf8(bytes) {
    try {
      return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    } catch (error) {
      throw new DecodeError("input is not valid UTF-8");
    }
  }

  // --- The closed schema (apps/receipts/verifier/schema.py) --------------------------------

  const REQ = "R";
  const OPT = "O";
  const FLAG = "F";
  const LIST = "E";
  const STR = { t: "str" };
  const U32 = { t: "int", max: 2n ** 32n - 1n };
  const U64 = { t: "int", max: 2n ** 64n - 1n };
  const BOOL = { t: "bool" };
  const FREE = { t: "free" };
  const FREE_OBJECT = { t: "free_object" };
  const SURFACE = { t: "surface" };
  const enm = (...values) => ({ t: "enum", values: new Set(values) });
  const obj = (fields) => ({ t: "obj", fields: fields });
  const arr = (element) => ({ t: "arr", element: element });
  const STRINGS = arr(STR);
  // server.md §1: U+0000 is Malformed in every name and string outside action.fields.
  const NUL = "\u0000";
  const NUL_REFUSED = "U+0000 (NUL) is not allowed outside action.fields";

  const OBSERVED_FACTS = {
    host: [OPT, STR],
    path: [OPT, STR],
    realpath: [OPT, STR],
    method: [OPT, enm("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")],
    argv_tokens: [LIST, STRINGS],
    row_count_estimate: [OPT, U64],
    is_payment: [FLAG, BOOL],
    is_secret: [FLAG, BOOL],
    is_identity_change: [FLAG, BOOL],
    is_model_call: [FLAG, BOOL],
    effect_destructive: [FLAG, BOOL],
    is_local_compute: [FLAG, BOOL],
    origin: [
      OPT,
      enm("browser_driver", "browser_form", "messaging_sdk", "payment_sdk", "agent_protocol",
        "storage_sdk", "sdk", "proxy"),
    ],
    observed_via: [OPT, enm("fs_hook", "object_sdk", "sql_proxy", "iac_tool", "http_delete")],
    has_file_body: [FLAG, BOOL],
    mcp_server: [OPT, STR],
  };
  const ERT = {
    observed_facts: [REQ, obj(OBSERVED_FACTS)],
    resource_class: [REQ, STR],
    effect: [REQ, enm("observe", "mutate", "destroy", "transfer_out", "spend", "grant", "effect_unknown")],
    egress: [REQ, enm("local", "crosses_trust_boundary", "crosses_unknown")],
    observability: [REQ, enm("wire", "args", "symbol", "blind")],
    taxonomy_hash: [REQ, STR],
  };
  const MANDATE = {
    mandate_id: [REQ, STR],
    mandate_hash: [REQ, STR],
    verdict: [REQ, enm("valid", "invalid", "absent")],
    payee: [REQ, STR],
    amount_minor: [REQ, U64],
    currency: [REQ, STR],
  };
  const ACTION = {
    verb: [REQ, enm("llm_call", "tool_call", "http_request", "payment", "data_export", "account_change", "delete")],
    domain: [OPT, STR],
    action: [OPT, STR],
    ert: [OPT, obj(ERT)],
    mandate: [OPT, obj(MANDATE)],
    tool_name: [REQ, STR],
    target_host: [OPT, STR],
    workflow: [REQ, STR],
    account: [REQ, STR],
    fields: [REQ, FREE_OBJECT],
    result_hash: [OPT, STR],
    error: [OPT, STR],
  };
  const MATCHED_CONDITION = { field: [REQ, STR], op: [REQ, STR], value: [REQ, FREE] };
  const POLICY = {
    rule_id: [REQ, STR],
    rule_display: [REQ, STR],
    matched_conditions: [REQ, arr(obj(MATCHED_CONDITION))],
    decision_path: [REQ, enm("allow", "block", "redact", "require_approval")],
  };
  const APPROVER_RECORD = {
    decision: [REQ, enm("approved", "rejected", "escalated")],
    approver_identity: [REQ, STR],
    reason: [REQ, STR],
    decided_at: [REQ, STR],
    sla_minutes: [OPT, U32],
  };
  const MULTI_APPROVAL = {
    threshold: [REQ, U32],
    roster: [REQ, STRINGS],
    approvers: [REQ, arr(obj(APPROVER_RECORD))],
  };
  const REDACTION = {
    mode: [REQ, enm("commit_and_reveal", "destructive")],
    markers: [REQ, arr(obj({ field_path: [REQ, STR], algorithm: [REQ, STR], commitment: [REQ, STR] }))],
    merkle_root: [OPT, STR],
  };
  const GUARDRAIL = {
    findings: [
      REQ,
      arr(obj({
        category: [REQ, enm("prompt_injection", "jailbreak", "tool_poisoning")],
        surface: [REQ, SURFACE],
        pattern_id: [REQ, STR],
        severity: [REQ, enm("suspicious", "malicious")],
      })),
    ],
    decision: [REQ, enm("block", "require_approval")],
  };
  const SUSPENSION = {
    resume_token_hash: [REQ, STR],
    context_ref: [REQ, obj({ scheme: [REQ, enm("customer", "langgraph", "none")], key: [REQ, STR], hash: [REQ, STR] })],
    tool_binding_hash: [OPT, STR],
    policy: [REQ, obj({ policy_id: [REQ, STR], policy_hash: [REQ, STR], rule: [REQ, STR] })],
    approval: [
      REQ,
      obj({
        sla: [REQ, STR],
        expires_at: [REQ, STR],
        on_timeout: [REQ, enm("deny", "escalate", "auto_approve")],
        approver_pubkeys: [REQ, STRINGS],
        escalation: [OPT, obj({ after: [REQ, STR], to: [REQ, STRINGS] })],
      }),
    ],
  };
  const KEY_ROTATION = {
    role: [REQ, enm("producer", "decision")],
    outgoing_public_key: [REQ, STR],
    incoming_public_key: [REQ, STR],
  };
  const TIME_ANCHOR = { kind: [REQ, STR], token_b64: [REQ, STR], tsa: [REQ, STR], anchored_hash: [REQ, STR] };
  const ATTESTATION = { kind: [REQ, STR], evidence: [REQ, STR], bound_field: [REQ, STR], collateral: [LIST, STRINGS] };
  const METRICS = {
    duration_ms: [REQ, U32],
    status: [REQ, enm("ok", "client_error", "server_error", "timeout", "refused", "error")],
    status_code: [OPT, U32],
    tokens_in: [OPT, U32],
    tokens_out: [OPT, U32],
    token_source: [OPT, enm("provider_reported", "estimated")],
    rate_card_id: [OPT, STR],
    bytes_in: [OPT, U32],
    bytes_out: [OPT, U32],
    retries: [OPT, U32],
  };
  const LIFECYCLE_KINDS = ["action", "suspended", "approved", "denied", "expired", "escalated", "completed", "key_rotation"];
  const CONTENT = {
    action_version: [REQ, STR],
    captured_at: [REQ, STR],
    agent_identity: [REQ, STR],
    action: [REQ, obj(ACTION)],
    policy: [REQ, obj(POLICY)],
    approver_decision: [OPT, obj(APPROVER_RECORD)],
    multi_approval: [OPT, obj(MULTI_APPROVAL)],
    redaction: [OPT, obj(REDACTION)],
    guardrail: [OPT, obj(GUARDRAIL)],
    trust_level: [REQ, enm("L0", "L1")],
    action_hash: [REQ, STR],
    session_id: [OPT, STR],
    seq: [OPT, U64],
    prev_receipt_hash: [OPT, STR],
    kind: [OPT, enm(...LIFECYCLE_KINDS)],
    suspension: [OPT, obj(SUSPENSION)],
    key_rotation: [OPT, obj(KEY_ROTATION)],
    nonce: [OPT, STR],
    time_anchor: [OPT, obj(TIME_ANCHOR)],
    anchor_policy: [OPT, enm("required")],
    attestation: [OPT, obj(ATTESTATION)],
    metrics: [OPT, obj(METRICS)],
  };
  const SIGNATURE_ENTRY = {
    algorithm: [REQ, STR],
    key_id: [REQ, STR],
    public_key: [REQ, STR],
    signature: [REQ, STR],
    valid_from: [OPT, STR],
    valid_until: [OPT, STR],
  };
  const TRANSPARENCY_PROOF = {
    log_id: [REQ, STR],
    leaf_index: [REQ, U64],
    inclusion_proof: [REQ, STRINGS],
    org_root: [OPT, STR],
    org_tree_size: [OPT, U64],
    epoch: [OPT, U64],
    org_id: [OPT, STR],
    top_leaf_index: [OPT, U64],
    top_inclusion_proof: [OPT, STRINGS],
    checkpoint: [REQ, STR],
    cosignatures: [OPT, arr(obj({ witness_key: [REQ, STR], signature: [REQ, STR] }))],
  };
  const ENVELOPE = {
    alg: [REQ, STR],
    content: [REQ, obj(CONTENT)],
    signatures: [REQ, arr(obj(SIGNATURE_ENTRY))],
    transparency: [OPT, arr(obj(TRANSPARENCY_PROOF))],
  };
  const SURFACE_OBJECT = { argument: [REQ, obj({ path: [REQ, STR] })] };

  const TYPED_INT = /^(?:0|[1-9][0-9]*)$/;

  function render(path) {
    let out = path[0];
    for (let k = 1; k < path.length; k++) {
      out += typeof path[k] === "number" ? `[${path[k]}]` : `.${path[k]}`;
    }
    return out;
  }

  function failAt(path, problem) {
    return new DecodeError(`${render(path)}: ${problem}`);
  }

  function newObject() {
    return Object.create(null);
  }

  function has(object, name) {
    return Object.prototype.hasOwnProperty.call(object, name);
  }

  function decodeObject(value, fields, path) {
    if (!(value instanceof JObj)) throw failAt(path, "expected an object");
    const decoded = newObject();
    for (const [name, member] of value.pairs) {
      const here = path.concat([name]);
      if (has(decoded, name)) throw failAt(here, "repeated member name");
      const spec = has(fields, name) ? fields[name] : undefined;
      if (spec === undefined) throw failAt(here, "unknown member");
      const [presence, kind] = spec;
      if (kind === STR && typeof member === "string") {
        if (member.indexOf(NUL) >= 0) throw failAt(here, NUL_REFUSED);
        decoded[name] = member;
        continue;
      }
      if (member === null && kind !== FREE) throw failAt(here, "null is not allowed (leave the member out)");
      if (presence === FLAG && member === false) throw failAt(here, "a default false is left out, not written");
      if (
        presence === LIST &&
        ((Array.isArray(member) && member.length === 0) || (member instanceof JObj && member.pairs.length === 0))
      ) {
        throw failAt(here, "a default empty array is left out, not written");
      }
      decoded[name] = decodeValue(member, kind, here);
    }
    for (const name of Object.keys(fields)) {
      if (fields[name][0] === REQ && !has(decoded, name)) {
        throw failAt(path.concat([name]), "required member missing");
      }
    }
    return decoded;
  }

  function decodeValue(value, kind, path) {
    switch (kind.t) {
      case "str":
        if (typeof value !== "string") throw failAt(path, "expected a string");
        if (value.indexOf(NUL) >= 0) throw failAt(path, NUL_REFUSED);
        return value;
      case "enum":
        if (typeof value !== "string" || !kind.values.has(value)) throw failAt(path, "not one of the allowed values");
        return value;
      case "obj":
        return decodeObject(value, kind.fields, path);
      case "arr":
        if (!Array.isArray(value)) throw failAt(path, "expected an array");
        return value.map((item, index) => decodeValue(item, kind.element, path.concat([index])));
      case "int": {
        if (!(value instanceof JNum) || !TYPED_INT.test(value.text)) {
          throw failAt(path, "expected a non-negative integer literal");
        }
        const number = BigInt(value.text);
        if (number > kind.max) throw failAt(path, "integer out of range");
        return number;
      }
      case "bool":
        if (typeof value !== "boolean") throw failAt(path, "expected a boolean");
        return value;
      case "free_object": // action.fields, the one place NUL is kept
        if (!(value instanceof JObj)) throw failAt(path, "expected an object");
        return decodeFree(value, path, true);
      case "free":
        return decodeFree(value, path, false);
      case "surface":
        if (typeof value === "string") {
          if (value !== "tool_description" && value !== "tool_result") {
            throw failAt(path, "not one of the allowed values");
          }
          return value;
        }
        return decodeObject(value, SURFACE_OBJECT, path);
      default:
        throw new Error("unknown schema type " + kind.t);
    }
  }

  /** A free-form value; numbers become the double the reference hashes. NUL is refused in
   * names and strings unless nulAllowed (inside action.fields; server.md §1). */
  function decodeFree(value, path, nulAllowed) {
    if (value instanceof JObj) {
      const decoded = newObject();
      for (const [name, member] of value.pairs) {
        const here = path.concat([name]);
        if (has(decoded, name)) throw failAt(here, "repeated member name");
        if (!nulAllowed && name.indexOf(NUL) >= 0) throw failAt(here, NUL_REFUSED);
        decoded[name] = decodeFree(member, here, nulAllowed);
      }
      return decoded;
    }
    if (Array.isArray(value)) {
      return value.map((item, index) => decodeFree(item, path.concat([index]), nulAllowed));
    }
    if (!nulAllowed && typeof value === "string" && value.indexOf(NUL) >= 0) {
      throw failAt(path, NUL_REFUSED);
    }
    if (value instanceof JNum) {
      const number = Number(value.text);
      if (!Number.isFinite(number)) throw failAt(path, "number out of range");
      return number === 0 ? 0 : number; // -0 hashes as 0, as in the reference
    }
    return value;
  }

  function decodeEnvelope(value) {
    return decodeObject(value, ENVELOPE, ["receipt"]);
  }

  function decodeContent(value) {
    return decodeObject(value, CONTENT, ["content"]);
  }

  // --- RFC 8785 (apps/receipts/verifier/canonical.py) --------------------------------------

  function jcs(value) {
    if (value === null) return "null";
    if (value === true) return "true";
    if (value === false) return "false";
    if (typeof value === "string") return JSON.stringify(value);
    if (typeof value === "bigint") return jcs(Number(value));
    if (typeof value === "number") {
      if (!Number.isFinite(value)) throw new Error("non-finite number");
      return String(value); // ES6 Number-to-String is exactly the JCS number form
    }
    if (Array.isArray(value)) return "[" + value.map(jcs).join(",") + "]";
    if (value instanceof JObj || value instanceof JNum) throw new Error("canonicalize a decoded value");
    // Default string comparison is by UTF-16 code units, as RFC 8785 requires.
    const names = Object.keys(value).sort();
    return "{" + names.map((name) => JSON.stringify(name) + ":" + jcs(value[name])).join(",") + "}";
  }

  function canonicalize(value) {
    return utf8(jcs(value));
  }

  function without(content, names) {
    const trimmed = newObject();
    for (const name of Object.keys(content)) if (!names.includes(name)) trimmed[name] = content[name];
    return trimmed;
  }

  function contentBytes(content, names) {
    return canonicalize(without(content, names || ["action_hash"]));
  }

  function contentHash(content) {
    return blake3Hex(contentBytes(content));
  }

  // --- Strict Ed25519 (apps/receipts/verifier/signatures.py) -------------------------------

  const DOMAIN_ACTION = utf8("heso-action/v1\0");
  const DOMAIN_APPROVAL = utf8("heso-approval/v1\0");
  const DOMAIN_APPROVAL_TOKEN = utf8("heso-approval-token/v1\0");
  const DOMAIN_SUSPEND = utf8("heso-action-suspend/v1\0");
  const DOMAIN_DECISION = utf8("heso-action-decision/v1\0");
  const DOMAIN_CHAIN = utf8("heso-rcpt-chain/v1\0");
  const DOMAIN_MIRROR = utf8("receipt-mirror-chain/v1\0");

  const P = 2n ** 255n - 19n;
  const L = 2n ** 252n + 27742317777372353535851937790883648493n;

  function mod(a, m) {
    const r = a % m;
    return r < 0n ? r + m : r;
  }

  function powmod(base, exponent, m) {
    let result = 1n;
    base = mod(base, m);
    while (exponent > 0n) {
      if (exponent & 1n) result = (result * base) % m;
      base = (base * base) % m;
      exponent >>= 1n;
    }
    return result;
  }

  const D = mod(-121665n * powmod(121666n, P - 2n, P), P);

  function littleEndian(bytes) {
    let value = 0n;
    for (let k = bytes.length - 1; k >= 0; k--) value = (value << 8n) | BigInt(bytes[k]);
    return value;
  }

  function isOnCurve(rawKey) {
    const y = mod(littleEndian(rawKey) & ((1n << 255n) - 1n), P);
    const y2 = (y * y) % P;
    const x2 = mod((y2 - 1n) * powmod(D * y2 + 1n, P - 2n, P), P);
    return x2 === 0n || powmod(x2, (P - 1n) / 2n, P) === 1n;
  }

  // Encodings of the points of small order, compared with the sign bit masked, as libsodium
  // (PyNaCl) does before verifying; WebCrypto does not refuse them.
  const SMALL_ORDER = [
    "0000000000000000000000000000000000000000000000000000000000000000",
    "0100000000000000000000000000000000000000000000000000000000000000",
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  ].map(fromHex);

  function hasSmallOrder(encoded) {
    return SMALL_ORDER.some((point) => {
      for (let k = 0; k < 31; k++) if (encoded[k] !== point[k]) return false;
      return (encoded[31] & 0x7f) === point[31];
    });
  }

  function isCanonicalPoint(encoded) {
    return (littleEndian(encoded) & ((1n << 255n) - 1n)) < P;
  }

  /** libsodium's crypto_sign_verify_detached acceptance, with WebCrypto doing the math. */
  async function strictVerify(rawKey, signature, message) {
    if (littleEndian(signature.subarray(32)) >= L) return false;
    if (hasSmallOrder(signature.subarray(0, 32))) return false;
    if (!isCanonicalPoint(rawKey) || hasSmallOrder(rawKey)) return false;
    try {
      const key = await crypto.subtle.importKey("raw", rawKey, { name: "Ed25519" }, false, ["verify"]);
      return await crypto.subtle.verify({ name: "Ed25519" }, key, signature, message);
    } catch (error) {
      return false;
    }
  }

  /** null when the signature verifies over message, else the §7 failure detail. */
  async function verifyEd25519(publicKeyB64, signatureB64, message) {
    const rawKey = canonicalB64decode(publicKeyB64);
    if (rawKey === null) return "malformed signature envelope: public_key not base64";
    if (rawKey.length !== 32) return "malformed signature envelope: public_key wrong length";
    const signature = canonicalB64decode(signatureB64);
    if (signature !== null && signature.length === 64 && (await strictVerify(rawKey, signature, message))) {
      return null;
    }
    if (!isOnCurve(rawKey)) return "malformed signature envelope: public_key not on curve";
    if (signature === null) return "malformed signature envelope: signature not base64";
    if (signature.length !== 64) return "malformed signature envelope: signature wrong length";
    return "signature verification failed";
  }

  // --- verify_receipt (apps/receipts/verifier/verify.py) -----------------------------------

  const ALG_V2 = "heso-action/v2+ed25519";
  const VERSION_V2 = "heso-action/2.0";
  const VERSION_V1 = "heso-action/1.0";
  const REDACTION_ALGORITHM = "salted-blake3/v1";
  const HEX64 = /^[0-9a-f]{64}$/;
  const DECISION_KINDS = new Set(["approved", "denied", "expired", "escalated"]);

  class Refusal extends Error {
    constructor(kind, detail) {
      super(kind);
      this.kind = kind;
      this.detail = detail === undefined ? null : detail;
    }
  }

  function malformedInput(error) {
    return {
      kind: "Malformed",
      detail: `input is not a well-formed action receipt: ${error.message}`,
      time_status: "NoTrustedTime",
      stage: "decode",
    };
  }

  async function verifyReceipt(text) {
    let value;
    try {
      value = parseJson(text);
    } catch (error) {
      if (error instanceof DecodeError) return malformedInput(error);
      throw error;
    }
    return verifyReceiptValue(value);
  }

  async function verifyReceiptValue(value) {
    let envelope;
    try {
      envelope = decodeEnvelope(value);
    } catch (error) {
      if (error instanceof DecodeError) return malformedInput(error);
      throw error;
    }
    const receipt = { envelope: envelope, content: envelope.content, canonical: contentBytes(envelope.content) };
    const verdict = { kind: "Valid", time_status: "NoTrustedTime", stage: "verify" };
    try {
      verdict.trust_level = await verifyDecoded(receipt);
      // Only a lifecycle kind can get here with a claim unlike the derived level (server.md
      // §1): the claim is reported as such, never echoed and never refused.
      if (envelope.content.trust_level !== verdict.trust_level) {
        verdict.claimed_trust_level = envelope.content.trust_level;
      }
    } catch (error) {
      if (!(error instanceof Refusal)) throw error;
      verdict.kind = error.kind;
      if (error.detail !== null) verdict.detail = error.detail;
    }
    verdict.action_hash = envelope.content.action_hash;
    verdict.receipt_kind = envelope.content.kind || "action";
    Object.defineProperty(verdict, "receipt", { value: receipt, enumerable: false });
    return verdict;
  }

  async function verifyDecoded(receipt) {
    const content = receipt.content;
    const envelope = receipt.envelope;
    if (envelope.alg !== ALG_V2) throw new Refusal("WrongAlgorithm", envelope.alg);
    const version = content.action_version;
    if (version !== VERSION_V2) {
      let detail = `action_version \`${version}\` (this verifier supports \`${VERSION_V2}\`)`;
      if (version === VERSION_V1) detail += " (a retired v1 receipt — re-verify it with a v1 verifier)";
      throw new Refusal("Unsupported", detail);
    }
    if ((content.kind || "action") !== "action") return verifyLifecycle(receipt);
    if (blake3Hex(receipt.canonical) !== content.action_hash) throw new Refusal("HashMismatch");
    for (const entry of envelope.signatures) {
      if (entry.key_id !== "operator" && entry.key_id !== "approver") {
        throw new Refusal("Malformed", `unknown signature role \`${entry.key_id}\``);
      }
    }
    const derived = has(content, "multi_approval") ? await verifyQuorum(receipt) : await verifySingle(receipt);
    if (content.trust_level !== derived) {
      throw new Refusal("TrustLevelMismatch", `embedded=${content.trust_level} derived=${derived}`);
    }
    checkRedaction(content);
    checkTimeAnchor(content);
    if (content.anchor_policy === "required" && !has(content, "time_anchor")) throw new Refusal("AnchorRequired");
    checkMandate(content);
    return derived;
  }

  function oneOperator(signatures) {
    const operators = signatures.filter((entry) => entry.key_id === "operator");
    if (operators.length > 1) throw new Refusal("Malformed", "more than one `operator` signature entry");
    if (!operators.length) throw new Refusal("Malformed", "no `operator` signature entry");
    return operators[0];
  }

  async function checkSignature(entry, message) {
    if (entry.algorithm !== "Ed25519") {
      throw new Refusal("InvalidSignature", `unsupported signature algorithm \`${entry.algorithm}\` — expected Ed25519`);
    }
    const problem = await verifyEd25519(entry.public_key, entry.signature, message);
    if (problem !== null) throw new Refusal("InvalidSignature", problem);
  }

  async function verifySingle(receipt) {
    const signatures = receipt.envelope.signatures;
    const operator = oneOperator(signatures);
    const approvers = signatures.filter((entry) => entry.key_id === "approver");
    if (approvers.length > 1) throw new Refusal("Malformed", "more than one `approver` signature entry");
    await checkSignature(operator, concat(DOMAIN_ACTION, receipt.canonical));
    if (!approvers.length) return "L0";
    const approver = approvers[0];
    await checkSignature(approver, concat(DOMAIN_APPROVAL, receipt.canonical));
    if (approver.public_key === operator.public_key) throw new Refusal("SelfApproval");
    return "L1";
  }

  function withApprovers(content, approvers) {
    const variant = Object.assign(newObject(), content);
    variant.multi_approval = Object.assign(newObject(), content.multi_approval, { approvers: approvers });
    return variant;
  }

  async function verifyQuorum(receipt) {
    const content = receipt.content;
    const quorum = content.multi_approval;
    if (has(content, "approver_decision")) {
      throw new Refusal("Malformed", "receipt carries both `approver_decision` and `multi_approval`");
    }
    if (quorum.threshold < 1n) throw new Refusal("Malformed", "multi_approval threshold must be >= 1");
    if (!quorum.roster.length) throw new Refusal("Malformed", "multi_approval roster must be non-empty");
    const signatures = receipt.envelope.signatures;
    const operator = oneOperator(signatures);
    await checkSignature(operator, concat(DOMAIN_ACTION, contentBytes(withApprovers(content, []))));
    const entries = signatures.filter((entry) => entry.key_id === "approver");
    const records = quorum.approvers;
    if (entries.length !== records.length) {
      throw new Refusal(
        "Malformed",
        `multi_approval has ${records.length} record(s) but ${entries.length} approver signature entr(ies)`,
      );
    }
    const seen = new Set();
    let verified = 0;
    for (const entry of entries) {
      const key = entry.public_key;
      const record = records.find((r) => r.approver_identity === key);
      if (record === undefined) {
        throw new Refusal("Malformed", `approver signature key \`${key}\` has no matching multi_approval record`);
      }
      if (seen.has(key)) throw new Refusal("Malformed", `duplicate approver key \`${key}\` in multi_approval`);
      seen.add(key);
      if (key === operator.public_key) throw new Refusal("SelfApproval");
      if (!quorum.roster.includes(key)) throw new Refusal("Malformed", `approver key \`${key}\` is not on the signed roster`);
      if (record.decision !== "approved") {
        throw new Refusal("Malformed", `multi_approval record for key \`${key}\` is not \`approved\``);
      }
      await checkSignature(entry, concat(DOMAIN_APPROVAL, contentBytes(withApprovers(content, [record]))));
      verified += 1;
    }
    if (verified < quorum.threshold) throw new Refusal("ThresholdNotMet", `have=${verified} need=${quorum.threshold}`);
    return "L1";
  }

  function checkRedaction(content) {
    const redaction = content.redaction;
    if (redaction === undefined) return;
    for (const marker of redaction.markers) {
      const path = marker.field_path;
      if (redaction.mode === "commit_and_reveal") {
        if (marker.algorithm !== REDACTION_ALGORITHM) {
          throw new Refusal(
            "MalformedRedaction",
            `redaction marker \`${path}\` uses algorithm \`${marker.algorithm}\` (expected \`${REDACTION_ALGORITHM}\`)`,
          );
        }
        if (!HEX64.test(marker.commitment)) {
          throw new Refusal("MalformedRedaction", `redaction marker \`${path}\` commitment is not 64 lowercase-hex`);
        }
      } else if (marker.algorithm === REDACTION_ALGORITHM || marker.commitment !== "") {
        throw new Refusal("MalformedRedaction", `destructive redaction marker \`${path}\` must carry no commitment`);
      }
    }
  }

  function checkTimeAnchor(content) {
    const anchor = content.time_anchor;
    if (anchor === undefined) return;
    const fail = "TimeAnchorUnverifiable";
    if (anchor.kind !== "rfc3161") {
      throw new Refusal(fail, `time_anchor kind \`${anchor.kind}\` is not supported (expected \`rfc3161\`)`);
    }
    const anchored = anchor.anchored_hash;
    if (!HEX64.test(anchored)) throw new Refusal(fail, "time_anchor anchored_hash is not 64 lowercase-hex");
    const preAnchor = blake3Hex(contentBytes(content, ["action_hash", "time_anchor"]));
    if (anchored !== preAnchor) {
      throw new Refusal(fail, `time_anchor anchored_hash ${anchored} does not match action_hash ${preAnchor}`);
    }
    const token = canonicalB64decode(anchor.token_b64);
    if (token === null) throw new Refusal(fail, "time_anchor token_b64 is not valid base64");
    if (!token.length) throw new Refusal(fail, "time_anchor token_b64 decoded to empty");
    throw new Refusal(fail, "time_anchor RFC 3161 token not verified: this service does not verify TSA tokens");
  }

  function checkMandate(content) {
    const action = content.action;
    const mandate = action.mandate;
    if (action.verb !== "payment" || mandate === undefined) return;
    if (mandate.verdict === "invalid") {
      throw new Refusal(
        "MandateRejected",
        "payment receipt carries a mandate binding with an INVALID verdict " +
          `(mandate_id \`${mandate.mandate_id}\`); the payment lacked a verified user authorization`,
      );
    }
    if (mandate.verdict === "absent") {
      throw new Refusal(
        "MandateRejected",
        "payment receipt carries a mandate binding marked ABSENT; the payment lacked a user authorization",
      );
    }
  }

  function lifecycleDomain(content) {
    const kind = content.kind;
    if (kind === "suspended") return [DOMAIN_SUSPEND, false];
    if (DECISION_KINDS.has(kind)) return [DOMAIN_DECISION, true];
    if (kind === "key_rotation" && content.key_rotation !== undefined && content.key_rotation.role === "decision") {
      return [DOMAIN_DECISION, true];
    }
    return [DOMAIN_ACTION, false];
  }

  /** A lifecycle kind the mirror may derive L1 for (server.md §1). */
  function needsDecisionAuthority(content) {
    return (content.kind || "action") !== "action" && lifecycleDomain(content)[1];
  }

  function kindLabel(kind) {
    return kind
      .split("_")
      .map((part) => part.charAt(0).toUpperCase() + part.slice(1).toLowerCase())
      .join("");
  }

  async function verifies(entry, message) {
    return entry.algorithm === "Ed25519" && (await verifyEd25519(entry.public_key, entry.signature, message)) === null;
  }

  async function verifyLifecycle(receipt) {
    const content = receipt.content;
    if (blake3Hex(receipt.canonical) !== content.action_hash) throw new Refusal("HashMismatch");
    const [domain, needsDecision] = lifecycleDomain(content);
    const label = kindLabel(content.kind);
    const signatures = receipt.envelope.signatures;
    let signer = null;
    for (const entry of signatures) {
      if (await verifies(entry, concat(domain, receipt.canonical))) {
        signer = entry;
        break;
      }
    }
    const actionMessage = concat(DOMAIN_ACTION, receipt.canonical);
    if (signer === null) {
      if (needsDecision) {
        for (const entry of signatures) {
          if (await verifies(entry, actionMessage)) {
            throw new Refusal(
              "Malformed",
              `${label} is decision-signed, but only a producer (operator) signature is present — a customer cannot approve their own pause`,
            );
          }
        }
      }
      throw new Refusal("Malformed", `no signature verifies under the ${label} kind's required domain`);
    }
    if (needsDecision) {
      for (const entry of signatures) {
        if (entry.public_key === signer.public_key && (await verifies(entry, actionMessage))) {
          throw new Refusal(
            "Malformed",
            `${label} decision is signed by the same key that produced an action authorization on this receipt — no self-approval`,
          );
        }
      }
    }
    // server.md §1: offline (no org, hence no registered approver keys) every lifecycle kind
    // derives L0; a differing claim is reported by verifyReceiptValue, not refused.
    return "L0";
  }

  // --- Session chains (apps/receipts/verifier/chain.py) ------------------------------------

  function jsonNumber(big) {
    const value = Number(big);
    return Number.isSafeInteger(value) ? value : String(big);
  }

  function linkHash(content) {
    const seq = content.seq === undefined ? 0n : content.seq;
    return blake3Hex(
      concat(
        DOMAIN_CHAIN,
        lengthPrefixed(utf8(content.session_id || "")),
        lengthPrefixed(u64le(seq)),
        lengthPrefixed(utf8(content.action_hash)),
      ),
    );
  }

  /** verify_action_receipt_chain over parsed elements; throws DecodeError on a bad element. */
  async function verifySessionChain(elements) {
    if (!elements.length) return { kind: "Empty" };
    const verdicts = [];
    for (let index = 0; index < elements.length; index++) {
      const verdict = await verifyReceiptValue(elements[index]);
      if (verdict.receipt === undefined) throw new DecodeError(`parse chain: element ${index}: ${verdict.detail}`);
      verdicts.push(verdict);
    }
    for (const verdict of verdicts) {
      const content = verdict.receipt.content;
      const seq = jsonNumber(content.seq || 0n);
      const kind = content.kind || "action";
      if (kind !== "action") return { kind: "WrongChainKind", seq: seq, receipt_kind: kindLabel(kind) };
      if (verdict.kind !== "Valid") return { kind: "ContentTamper", seq: seq, reason: verdict.kind };
    }
    return checkLinks(verdicts.map((verdict) => verdict.receipt.content));
  }

  function broken(seq, detail) {
    return { kind: "LinkBroken", seq: jsonNumber(seq), detail: detail };
  }

  function checkLinks(contents) {
    const genesis = contents[0];
    if (!has(genesis, "session_id") || !has(genesis, "seq")) {
      return broken(0n, "genesis receipt carries no chain block (session_id + seq required)");
    }
    if (genesis.seq !== 0n) return broken(genesis.seq, `genesis receipt has seq ${genesis.seq}, expected 0`);
    if (genesis.prev_receipt_hash) return broken(0n, "genesis receipt must carry no prev_receipt_hash");
    let previous = genesis;
    for (let expected = 1; expected < contents.length; expected++) {
      const content = contents[expected];
      if (!has(content, "session_id") || !has(content, "seq")) {
        return broken(BigInt(expected), "non-genesis receipt carries no chain block");
      }
      const seq = content.seq;
      if (content.session_id !== genesis.session_id) {
        return broken(seq, `session_id changed mid-chain: \`${content.session_id}\` != genesis \`${genesis.session_id}\``);
      }
      if (seq !== BigInt(expected)) {
        return broken(seq, `seq ${seq} out of order (expected ${expected}); a drop, reorder, or insert breaks the chain`);
      }
      if (!has(content, "prev_receipt_hash")) return broken(seq, "non-genesis receipt carries no prev_receipt_hash");
      const want = linkHash(previous);
      if (content.prev_receipt_hash !== want) {
        return broken(
          seq,
          `prev_receipt_hash ${content.prev_receipt_hash} != recomputed link ${want} of seq ${previous.seq}`,
        );
      }
      previous = content;
    }
    return { kind: "Valid", length: contents.length };
  }

  // --- The org mirror chain (server.md §3, apps/receipts/mirror_chain.py) ------------------

  const EMPTY_CHAIN_HEAD = "0".repeat(64);

  function receiptDigest(storedReceipt) {
    return blake3Hex(utf8(storedReceipt));
  }

  function mirrorChainHash(prevChainHash, seq, actionHash, receiptDigestHex, supersedesActionHash) {
    return blake3Hex(
      concat(
        DOMAIN_MIRROR,
        fromHex(prevChainHash),
        u64le(seq),
        lengthPrefixed(utf8(actionHash)),
        fromHex(receiptDigestHex),
        lengthPrefixed(utf8(supersedesActionHash || "")),
      ),
    );
  }

  /**
   * Re-verify an exported window of GET /v1/audit/chain: every stored receipt, its digest,
   * every chain_hash, the links between consecutive entries and, when the window holds the
   * newest entry, the head.
   */
  async function verifyChainWindow(window) {
    const problems = [];
    const results = [];
    const entries = Array.isArray(window.entries) ? window.entries.slice() : null;
    if (entries === null) return { kind: "ChainBroken", problems: ["the window has no `entries` array"], entries: [] };
    entries.sort((a, b) => a.seq - b.seq);
    let previous = null;
    for (const entry of entries) {
      const found = [];
      const notes = [];
      const seq = entry.seq;
      if (!Number.isSafeInteger(seq) || seq < 1) {
        results.push({ seq: seq, ok: false, problems: ["seq is not a positive integer"], notes: [] });
        problems.push(`seq ${seq}: seq is not a positive integer`);
        previous = null;
        continue;
      }
      let verdict = null;
      if (typeof entry.receipt !== "string") {
        found.push("the entry carries no stored receipt text");
      } else {
        verdict = await verifyReceipt(entry.receipt);
        if (verdict.kind !== "Valid") {
          found.push(`receipt does not verify: ${verdict.kind}${verdict.detail ? ": " + verdict.detail : ""}`);
        } else {
          const stored = entry.trust_level;
          if (stored === "L1" && verdict.trust_level === "L0" && needsDecisionAuthority(verdict.receipt.content)) {
            // server.md §1: the mirror derives L1 for a decision signed by an approver key
            // registered for the org; that registry is not in the window.
            notes.push("trust_level L1 is the mirror's: it rests on the org's registered approver keys, " +
              "which this page cannot see (offline the receipt derives L0)");
          } else if (stored !== undefined && stored !== verdict.trust_level) {
            found.push(`trust_level ${stored} but the receipt derives ${verdict.trust_level}`);
          }
          if (jcs(verdict.receipt.envelope) !== entry.receipt) {
            found.push("the stored receipt text is not its canonical (JCS) form");
          }
        }
        if (verdict.action_hash !== undefined && verdict.action_hash !== entry.action_hash) {
          found.push(`action_hash ${entry.action_hash} but the receipt says ${verdict.action_hash}`);
        }
        const digest = receiptDigest(entry.receipt);
        if (digest !== entry.receipt_digest) found.push(`receipt_digest ${entry.receipt_digest} != recomputed ${digest}`);
      }
      const hexOk = HEX64.test(entry.prev_chain_hash || "") && HEX64.test(entry.receipt_digest || "");
      if (!hexOk) {
        found.push("prev_chain_hash or receipt_digest is not 64 lowercase-hex");
      } else if (typeof entry.action_hash === "string") {
        const recomputed = mirrorChainHash(
          entry.prev_chain_hash, seq, entry.action_hash, entry.receipt_digest, entry.supersedes_action_hash,
        );
        if (recomputed !== entry.chain_hash) found.push(`chain_hash ${entry.chain_hash} != recomputed ${recomputed}`);
      }
      if (seq === 1 && entry.prev_chain_hash !== EMPTY_CHAIN_HEAD) found.push("seq 1 must link to 64 zeros");
      if (previous !== null) {
        if (seq !== previous.seq + 1) found.push(`seq ${seq} follows seq ${previous.seq}: entries are missing`);
        else if (entry.prev_chain_hash !== previous.chain_hash) {
          found.push(`prev_chain_hash ${entry.prev_chain_hash} != chain_hash of seq ${previous.seq}`);
        }
      }
      for (const problem of found) problems.push(`seq ${seq}: ${problem}`);
      results.push({
        seq: seq,
        ok: found.length === 0,
        problems: found,
        notes: notes,
        verdict: verdict,
        action_hash: entry.action_hash,
        chain_hash: entry.chain_hash,
      });
      previous = entry;
    }
    let headChecked = false;
    const newest = entries[entries.length - 1];
    if (newest !== undefined && newest.seq === window.size) {
      headChecked = true;
      if (window.head !== newest.chain_hash) problems.push(`head ${window.head} != chain_hash of seq ${newest.seq}`);
    } else if (newest === undefined && window.size === 0 && window.head !== EMPTY_CHAIN_HEAD) {
      problems.push("an empty chain's head must be 64 zeros");
    }
    return {
      kind: problems.length ? "ChainBroken" : "ChainValid",
      problems: problems,
      entries: results,
      head_checked: headChecked,
      oldest_seq: entries.length ? entries[0].seq : null,
      newest_seq: newest ? newest.seq : null,
    };
  }

  // --- The approver's bytes (apps/approvals/tokens) ----------------------------------------

  const DECISION_TAGS = { approved: 1, rejected: 2 };

  /** nonce (32) || expiry (u64 BE) || decision_tag || scope_len (u32 BE) || scope. */
  function tokenFields(nonce, expiry, decision, scope) {
    if (nonce.length !== 32) throw new Error("nonce must be 32 bytes");
    if (!(decision in DECISION_TAGS)) throw new Error("decision must be 'approved' or 'rejected'");
    const scopeBytes = utf8(scope);
    return concat(nonce, u64be(expiry), new Uint8Array([DECISION_TAGS[decision]]), u32be(scopeBytes.length), scopeBytes);
  }

  /** approvals.md §2: the exact bytes an approver signs. */
  function approvalTokenMessage(nonce, expiry, decision, scope, actionCanonical) {
    return concat(DOMAIN_APPROVAL_TOKEN, tokenFields(nonce, expiry, decision, scope), actionCanonical);
  }

  function encodeApprovalToken(nonce, expiry, decision, scope, signature, publicKey) {
    return concat(tokenFields(nonce, expiry, decision, scope), signature, publicKey);
  }

  class CosignError extends Error {}

  const RECORD_MEMBERS = ["decision", "approver_identity", "reason", "decided_at", "sla_minutes"];

  /** The reference's lenient ApproverRecord decoding (apps/approvals/tokens/record.py). */
  function decodeRecord(value) {
    let members;
    if (value instanceof JObj) {
      members = newObject();
      for (const [name, member] of value.pairs) {
        if (!RECORD_MEMBERS.includes(name)) continue;
        if (has(members, name)) throw new DecodeError(`record.${name}: repeated member name`);
        members[name] = member;
      }
    } else if (Array.isArray(value)) {
      if (value.length > RECORD_MEMBERS.length) throw new DecodeError("record: too many elements in the sequence form");
      members = newObject();
      value.forEach((member, index) => {
        members[RECORD_MEMBERS[index]] = member;
      });
    } else {
      throw new DecodeError("record: expected an object");
    }
    let decision = has(members, "decision") ? members.decision : null;
    if (decision instanceof JObj && decision.pairs.length === 1 && decision.pairs[0][1] === null) {
      decision = decision.pairs[0][0];
    }
    if (decision === null) throw new DecodeError("record.decision: required member missing");
    if (typeof decision !== "string" || !["approved", "rejected", "escalated"].includes(decision)) {
      throw new DecodeError("record.decision: not one of the allowed values");
    }
    const decoded = newObject();
    decoded.decision = decision;
    for (const name of ["approver_identity", "reason", "decided_at"]) {
      const member = has(members, name) ? members[name] : null;
      if (typeof member !== "string") {
        throw new DecodeError(`record.${name}: ${member === null ? "required member missing" : "expected a string"}`);
      }
      decoded[name] = member;
    }
    const sla = has(members, "sla_minutes") ? members.sla_minutes : null;
    if (sla !== null) {
      if (!(sla instanceof JNum) || !TYPED_INT.test(sla.text)) {
        throw new DecodeError("record.sla_minutes: expected a non-negative integer literal");
      }
      if (BigInt(sla.text) > 2n ** 32n - 1n) throw new DecodeError("record.sla_minutes: integer out of range");
      decoded.sla_minutes = BigInt(sla.text);
    }
    return decoded;
  }

  function suspendedBody(text, where) {
    let content;
    try {
      content = decodeContent(parseJson(text));
    } catch (error) {
      if (error instanceof DecodeError) throw new CosignError(`${where}: suspended body is not a valid content: ${error.message}`);
      throw error;
    }
    if (has(content, "time_anchor")) {
      throw new CosignError(`${where}: suspended body carries a time_anchor; the async-L1 path promotes a pre-anchor L0 body`);
    }
    return content;
  }

  function recordValue(recordText, where) {
    try {
      return decodeRecord(parseJson(recordText));
    } catch (error) {
      if (error instanceof DecodeError) throw new CosignError(`${where}: approver record is not valid: ${error.message}`);
      throw error;
    }
  }

  /** approvals.md §5: heso-approval/v1\0 || C(S with approver_decision = R, L1). */
  function l1CosignPayload(suspendedText, recordText) {
    const where = "l1_cosign_payload";
    const content = suspendedBody(suspendedText, where);
    if (has(content, "approver_decision") || content.trust_level !== "L0") {
      throw new CosignError(`${where}: suspended body is already decided or not L0`);
    }
    const body = Object.assign(newObject(), content);
    body.approver_decision = recordValue(recordText, where);
    body.trust_level = "L1";
    return concat(DOMAIN_APPROVAL, contentBytes(body));
  }

  /** approvals.md §6: heso-approval/v1\0 || C(Q with approvers = [R]). */
  function quorumCosignPayload(suspendedText, threshold, roster, recordText) {
    const where = "quorum_cosign_payload";
    const content = suspendedBody(suspendedText, where);
    if (has(content, "approver_decision") || has(content, "multi_approval") || content.trust_level !== "L0") {
      throw new CosignError(`${where}: suspended body is already decided or not L0`);
    }
    if (threshold < 1) throw new CosignError(`${where}: multi-approval threshold must be >= 1`);
    if (threshold > 4294967295) throw new CosignError(`${where}: multi-approval threshold is out of range`);
    if (!roster.length) throw new CosignError(`${where}: multi-approval roster must be non-empty`);
    const record = recordValue(recordText, where);
    const body = Object.assign(newObject(), content);
    const quorum = newObject();
    quorum.threshold = BigInt(threshold);
    quorum.roster = roster.slice().sort(byCodePoint);
    quorum.approvers = [record];
    body.multi_approval = quorum;
    body.trust_level = "L1";
    return concat(DOMAIN_APPROVAL, contentBytes(body));
  }

  /** Python's sorted() order of strings (code points, not UTF-16 units). */
  function byCodePoint(a, b) {
    const x = Array.from(a, (c) => c.codePointAt(0));
    const y = Array.from(b, (c) => c.codePointAt(0));
    for (let k = 0; k < Math.min(x.length, y.length); k++) if (x[k] !== y[k]) return x[k] - y[k];
    return x.length - y.length;
  }

  /** C of a content given as JSON text, for canonicalization vectors and the approver. */
  function canonicalContent(text) {
    const content = decodeContent(parseJson(text));
    const canonical = contentBytes(content);
    return { content: content, canonical: canonical, action_hash: blake3Hex(canonical) };
  }

  root.MirrorCore = {
    DecodeError: DecodeError,
    CosignError: CosignError,
    JObj: JObj,
    JNum: JNum,
    parseJson: parseJson,
    decodeUtf8: decodeUtf8,
    decodeEnvelope: decodeEnvelope,
    decodeContent: decodeContent,
    decodeRecord: decodeRecord,
    jcs: jcs,
    canonicalize: canonicalize,
    contentBytes: contentBytes,
    contentHash: contentHash,
    canonicalContent: canonicalContent,
    canonicalB64decode: canonicalB64decode,
    b64encode: b64encode,
    toHex: toHex,
    fromHex: fromHex,
    utf8: utf8,
    concat: concat,
    blake3Hex: blake3Hex,
    isOnCurve: isOnCurve,
    verifyEd25519: verifyEd25519,
    verifyReceipt: verifyReceipt,
    verifyReceiptValue: verifyReceiptValue,
    verifySessionChain: verifySessionChain,
    linkHash: linkHash,
    receiptDigest: receiptDigest,
    mirrorChainHash: mirrorChainHash,
    verifyChainWindow: verifyChainWindow,
    approvalTokenMessage: approvalTokenMessage,
    encodeApprovalToken: encodeApprovalToken,
    l1CosignPayload: l1CosignPayload,
    quorumCosignPayload: quorumCosignPayload,
    DOMAIN_APPROVAL: DOMAIN_APPROVAL,
  };
})(typeof window !== "undefined" ? window : globalThis);
