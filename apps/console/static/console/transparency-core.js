/*
 * Transparency-log proofs checked in the browser (transparency.md §2.3, §3.2, §4, §7), as
 * apps/transparency/tree/proof.py does: RFC 6962 inclusion with WebCrypto SHA-256, the
 * checkpoint note, cosignature/v1 lines with the page's strict Ed25519 (receipt-core.js).
 * The trusted origin, witness keys and quorum come from the person using the page, never
 * from the proof or the service. Nothing here touches the network.
 *
 *   MirrorTransparency.verifyProof(actionHashHex, proofValue, origin, witnessKeys, required, orgId?)
 *     -> {valid: true} or {valid: false, reason, detail}; proofValue as core.parseJson gives it.
 */
(function (root) {
  "use strict";

  const core = root.MirrorCore;
  const HEX64 = /^[0-9a-f]{64}$/;
  const HEX8 = /^[0-9a-f]{8}$/;
  const ORG_ID = /^olog_[a-z2-7]{26}$/;
  const SIZE = /^(0|[1-9][0-9]*)$/;
  const INT = /^-?(0|[1-9][0-9]*)$/;
  const MAX_U64 = (1n << 64n) - 1n;
  const MAX_TIME = (1n << 63n) - 1n;
  const EM_DASH = "\u2014 ";
  const REQUIRED = ["log_id", "leaf_index", "inclusion_proof", "org_root", "org_tree_size", "epoch",
    "org_id", "top_leaf_index", "checkpoint"];
  const OPTIONAL = ["top_inclusion_proof", "cosignatures"];
  const ORG_HEAD_PREFIX = core.utf8("receipt-mirror-org-head/v1\u0000");

  class Fail extends Error {
    constructor(reason, detail) {
      super(detail);
      this.reason = reason;
    }
  }

  async function sha256(bytes) {
    return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  }

  const leafHash = (leaf) => sha256(core.concat(new Uint8Array([0]), leaf));
  const nodeHash = (left, right) => sha256(core.concat(new Uint8Array([1]), left, right));

  function equal(a, b) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  /** RFC 9162 §2.1.3.2 (§2.3), sizes as BigInt. */
  async function verifyInclusion(leaf, index, size, proof, rootHash) {
    if (!(index < size) || proof.length > 64) return false;
    let fn = index;
    let sn = size - 1n;
    let r = leaf;
    for (const p of proof) {
      if (sn === 0n) return false;
      if ((fn & 1n) === 1n || fn === sn) {
        r = await nodeHash(p, r);
        if ((fn & 1n) === 0n) {
          while ((fn & 1n) === 0n && fn !== 0n) {
            fn >>= 1n;
            sn >>= 1n;
          }
        }
      } else {
        r = await nodeHash(r, p);
      }
      fn >>= 1n;
      sn >>= 1n;
    }
    return sn === 0n && equal(r, rootHash);
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

  function orgHeadLeaf(orgId, size, orgRoot) {
    const name = core.utf8(orgId);
    return core.concat(ORG_HEAD_PREFIX, u64le(name.length), name, u64le(size), orgRoot);
  }

  function isKeyName(name) {
    return typeof name === "string" && name.length > 0 && !name.includes("+") &&
      !/[\s\u0000-\u001f\u007f-\u009f]/u.test(name);
  }

  async function parseVkey(vkey) {
    if (typeof vkey !== "string") throw new Error("a vkey is a string");
    const plus = vkey.indexOf("+");
    if (plus < 0) throw new Error("a vkey is name+keyid+key");
    const name = vkey.slice(0, plus);
    const rest = vkey.slice(plus + 1);
    const second = rest.indexOf("+");
    if (second < 0) throw new Error("a vkey is name+keyid+key");
    const hexId = rest.slice(0, second);
    if (!isKeyName(name)) throw new Error("bad key name");
    if (!HEX8.test(hexId)) throw new Error("the key ID is 8 lowercase hex digits");
    const key = core.canonicalB64decode(rest.slice(second + 1));
    if (key === null || key.length !== 33) throw new Error("the key is b64 of 33 bytes");
    if (key[0] !== 4) throw new Error("not a cosignature/v1 key");
    const digest = await sha256(core.concat(core.utf8(name), new Uint8Array([10]), key));
    if (core.toHex(digest.subarray(0, 4)) !== hexId) throw new Error("the key ID does not match");
    return { name: name, keyId: hexId, publicKey: key.subarray(1) };
  }

  function parseSignatureLine(line) {
    if (!line.startsWith(EM_DASH)) throw new Error("a signature line starts with an em dash");
    const rest = line.slice(EM_DASH.length);
    const space = rest.indexOf(" ");
    if (space < 0) throw new Error("no signature in a signature line");
    const name = rest.slice(0, space);
    if (!isKeyName(name)) throw new Error("bad key name in a signature line");
    const signature = core.canonicalB64decode(rest.slice(space + 1));
    if (signature === null || signature.length < 5) throw new Error("bad signature");
    return { name: name, signature: signature };
  }

  /** §4.3: the served note, or an Error (bad_checkpoint). */
  function parseCheckpoint(note) {
    if (/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/.test(note)) throw new Error("control character");
    if (/[\ud800-\udfff]/.test(note.replace(/[\ud800-\udbff][\udc00-\udfff]/g, ""))) {
      throw new Error("not UTF-8");
    }
    const split = note.indexOf("\n\n");
    if (split < 0) throw new Error("no blank line after the body");
    const lines = note.slice(0, split).split("\n");
    if (lines.length !== 3) throw new Error("the body is not three lines");
    const [origin, sizeText, rootText] = lines;
    if (!origin) throw new Error("empty origin");
    if (!SIZE.test(sizeText) || BigInt(sizeText) > MAX_U64) throw new Error("bad tree size");
    const rootHash = core.canonicalB64decode(rootText);
    if (rootHash === null || rootHash.length !== 32) throw new Error("bad root hash");
    const block = note.slice(split + 2);
    const signatures = [];
    if (block) {
      if (!block.endsWith("\n")) throw new Error("the signature block does not end with LF");
      for (const line of block.slice(0, -1).split("\n")) signatures.push(parseSignatureLine(line));
    }
    return { origin: origin, size: BigInt(sizeText), root: rootHash, body: note.slice(0, split + 1),
      lines: signatures };
  }

  function bigEndian(bytes) {
    let value = 0n;
    for (const b of bytes) value = (value << 8n) | BigInt(b);
    return value;
  }

  async function cosignatureVerifies(key, line, body) {
    const data = line.signature;
    if (line.name !== key.name || data.length !== 76) return false;
    if (core.toHex(data.subarray(0, 4)) !== key.keyId) return false;
    const time = bigEndian(data.subarray(4, 12));
    if (time > MAX_TIME) return false;
    const message = core.utf8(`cosignature/v1\ntime ${time}\n${body}`);
    const failure = await core.verifyEd25519(core.b64encode(key.publicKey),
      core.b64encode(data.subarray(12)), message);
    return failure === null;
  }

  // --- shape (§7 step 2), over core.parseJson values ---------------------------------------

  function members(value) {
    if (!(value instanceof core.JObj)) return null;
    const out = new Map();
    for (const [name, member] of value.pairs) out.set(name, member);
    return out;
  }

  function u64(value, minimum) {
    if (!(value instanceof core.JNum) || !INT.test(value.text)) return null;
    const number = BigInt(value.text);
    return number >= BigInt(minimum) && number <= MAX_U64 ? number : null;
  }

  function hashList(value) {
    if (!Array.isArray(value) || value.length > 64) return null;
    if (!value.every((item) => typeof item === "string" && HEX64.test(item))) return null;
    return value.map(core.fromHex);
  }

  function shape(proof) {
    const found = members(proof);
    if (found === null) throw new Fail("malformed", "the proof is not an object");
    const missing = REQUIRED.filter((name) => !found.has(name));
    if (missing.length) throw new Fail("malformed", `missing member(s): ${missing.join(", ")}`);
    const unknown = [...found.keys()].filter((n) => !REQUIRED.includes(n) && !OPTIONAL.includes(n));
    if (unknown.length) throw new Fail("malformed", `unknown member(s): ${unknown.join(", ")}`);
    const out = {};
    for (const [name, minimum] of [["leaf_index", 0], ["top_leaf_index", 0], ["org_tree_size", 1], ["epoch", 1]]) {
      out[name] = u64(found.get(name), minimum);
      if (out[name] === null) throw new Fail("malformed", `${name} is not an integer in u64`);
    }
    out.inclusion_proof = hashList(found.get("inclusion_proof"));
    if (out.inclusion_proof === null) throw new Fail("malformed", "inclusion_proof is not hex64 hashes");
    if (found.has("top_inclusion_proof")) {
      out.top_inclusion_proof = hashList(found.get("top_inclusion_proof"));
      if (out.top_inclusion_proof === null || out.top_inclusion_proof.length === 0) {
        throw new Fail("malformed", "top_inclusion_proof is not a non-empty array of hex64");
      }
    } else {
      out.top_inclusion_proof = [];
    }
    const orgRoot = found.get("org_root");
    if (typeof orgRoot !== "string" || !HEX64.test(orgRoot)) throw new Fail("malformed", "org_root is not hex64");
    out.org_root = core.fromHex(orgRoot);
    out.org_id = found.get("org_id");
    if (typeof out.org_id !== "string" || !ORG_ID.test(out.org_id)) throw new Fail("malformed", "bad org_id");
    for (const name of ["log_id", "checkpoint"]) {
      out[name] = found.get(name);
      if (typeof out[name] !== "string") throw new Fail("malformed", `${name} is not a string`);
    }
    if (found.has("cosignatures")) {
      const list = found.get("cosignatures");
      if (!Array.isArray(list) || list.length === 0) throw new Fail("malformed", "cosignatures is not a non-empty array");
      for (const item of list) {
        const pairs = members(item);
        if (pairs === null || pairs.size !== 2 || typeof pairs.get("witness_key") !== "string" ||
          typeof pairs.get("signature") !== "string") {
          throw new Fail("malformed", "a cosignature is not {witness_key, signature}");
        }
      }
    }
    return out;
  }

  async function verify(actionHash, proof, origin, witnessKeys, required, orgId) {
    if (typeof actionHash !== "string" || !HEX64.test(actionHash)) throw new Fail("bad_input", "action hash is not hex64");
    if (typeof origin !== "string" || !origin) throw new Fail("bad_input", "origin is not a non-empty string");
    if (!Array.isArray(witnessKeys)) throw new Fail("bad_input", "witness keys are not a list");
    const keys = [];
    for (const vkey of witnessKeys) {
      try {
        keys.push(await parseVkey(vkey));
      } catch (error) {
        throw new Fail("bad_input", `witness key ${vkey}: ${error.message}`);
      }
    }
    if (!Number.isInteger(required) || required < 0) throw new Fail("bad_input", "the quorum is not an integer >= 0");
    if (orgId !== undefined && orgId !== null && typeof orgId !== "string") throw new Fail("bad_input", "org_id is not a string");
    const checked = shape(proof);
    let checkpoint;
    try {
      checkpoint = parseCheckpoint(checked.checkpoint);
    } catch (error) {
      throw new Fail("bad_checkpoint", error.message);
    }
    if (checked.log_id !== origin || checkpoint.origin !== origin) throw new Fail("wrong_log", "not the trusted origin");
    const vouching = new Set();
    for (const line of checkpoint.lines) {
      for (const key of keys) {
        if (line.name !== key.name || core.toHex(line.signature.subarray(0, 4)) !== key.keyId) continue;
        if (!(await cosignatureVerifies(key, line, checkpoint.body))) {
          throw new Fail("bad_cosignature", `${key.name}: the cosignature does not verify`);
        }
        vouching.add(`${key.name}+${key.keyId}+${core.toHex(key.publicKey)}`);
      }
    }
    if (vouching.size < required) {
      throw new Fail("insufficient_cosignatures", `${vouching.size} trusted cosignature(s), ${required} required`);
    }
    if (orgId !== undefined && orgId !== null && checked.org_id !== orgId) throw new Fail("wrong_org", "another org's proof");
    const leaf = await leafHash(core.fromHex(actionHash));
    if (!(await verifyInclusion(leaf, checked.leaf_index, checked.org_tree_size, checked.inclusion_proof, checked.org_root))) {
      throw new Fail("org_inclusion_failed", "the receipt is not in the org tree at that size");
    }
    const head = await leafHash(orgHeadLeaf(checked.org_id, checked.org_tree_size, checked.org_root));
    if (!(await verifyInclusion(head, checked.top_leaf_index, checkpoint.size, checked.top_inclusion_proof, checkpoint.root))) {
      throw new Fail("top_inclusion_failed", "the org head is not in the checkpoint's tree");
    }
    return { valid: true, epoch: Number(checked.epoch), org_id: checked.org_id, leaf_index: String(checked.leaf_index),
      checkpoint_size: String(checkpoint.size), cosigned_by: vouching.size };
  }

  async function verifyProof(actionHash, proof, origin, witnessKeys, required, orgId) {
    try {
      return await verify(actionHash, proof, origin, witnessKeys, required, orgId);
    } catch (error) {
      if (error instanceof Fail) return { valid: false, reason: error.reason, detail: error.message };
      return { valid: false, reason: "malformed", detail: error.message };
    }
  }

  root.MirrorTransparency = {
    verifyProof: verifyProof,
    verifyInclusion: verifyInclusion,
    parseCheckpoint: parseCheckpoint,
    parseVkey: parseVkey,
  };
})(typeof window !== "undefined" ? window : globalThis);
