/*
 * The /verify page: everything runs here, in the browser (receipt-core.js); the input is
 * never sent anywhere. Also exposes the verifier for scripts and tests:
 *   mirrorVerify(text)             one receipt -> its verdict
 *   mirrorVerifyMany(texts)        the same, for a list
 *   mirrorCanonical(contentText)   {ok, canonical_hex, action_hash} or {ok: false, error}
 *   mirrorLinkHash(contentText)    receipts.md §13.1
 *   mirrorVerifySessionChain(text) receipts.md §13.2 outcome (or {error})
 *   mirrorVerifyInput(text)        what the page shows for any accepted input
 *   mirrorVerifyPolicyApprovals(value)  a co-signed policy change's approvals (the answer of
 *                                  GET /v1/policy/approvals/{hash}, or an entry of the
 *                                  evidence export's policy_approvals.json)
 */
(function () {
  "use strict";

  const core = window.MirrorCore;

  function plain(verdict) {
    const shown = { kind: verdict.kind };
    const names = ["trust_level", "claimed_trust_level", "detail", "time_status", "stage", "action_hash", "receipt_kind"];
    for (const name of names) {
      if (verdict[name] !== undefined) shown[name] = verdict[name];
    }
    return shown;
  }

  async function mirrorVerify(text) {
    return plain(await core.verifyReceipt(text));
  }

  async function mirrorVerifyMany(texts) {
    const out = [];
    for (const text of texts) out.push(await mirrorVerify(text));
    return out;
  }

  function mirrorCanonical(text) {
    try {
      const result = core.canonicalContent(text);
      return { ok: true, canonical_hex: core.toHex(result.canonical), action_hash: result.action_hash };
    } catch (error) {
      return { ok: false, error: error.message };
    }
  }

  function mirrorLinkHash(text) {
    return core.linkHash(core.decodeContent(core.parseJson(text)));
  }

  async function mirrorVerifySessionChain(text) {
    try {
      const elements = core.parseJson(text);
      if (!Array.isArray(elements)) return { error: "a session chain is a JSON array of receipts" };
      return await core.verifySessionChain(elements);
    } catch (error) {
      return { error: error.message };
    }
  }

  function member(value, name) {
    if (!(value instanceof core.JObj)) return undefined;
    const pair = value.pairs.find((p) => p[0] === name);
    return pair === undefined ? undefined : pair[1];
  }

  /** A parsed window back to plain JSON (JSON.parse would do, but keep one strict parser). */
  function toPlain(value) {
    if (value instanceof core.JObj) {
      const out = Object.create(null);
      for (const [name, member] of value.pairs) out[name] = toPlain(member);
      return out;
    }
    if (value instanceof core.JNum) return Number(value.text);
    if (Array.isArray(value)) return value.map(toPlain);
    return value;
  }

  /** The trust inputs for transparency proofs: the person's own, never the proof's. */
  function readTrust() {
    const value = (id) => (document.getElementById(id) ? document.getElementById(id).value.trim() : "");
    const keys = value("tlog-keys").split(/\r?\n/).map((line) => line.trim()).filter((line) => line);
    const required = value("tlog-required");
    return { origin: value("tlog-origin"), keys: keys, required: required === "" ? keys.length : Number(required),
      orgId: value("tlog-org") || null };
  }

  /** transparency.md §7 for each proof in a receipt's transparency[] (a Valid receipt only). */
  async function transparencyOf(parsed, verdict) {
    const proofs = member(parsed, "transparency");
    if (!Array.isArray(proofs) || proofs.length === 0) return undefined;
    if (verdict.kind !== "Valid") return { skipped: "the receipt itself does not verify" };
    const trust = readTrust();
    if (!trust.origin) return { skipped: "give the log's origin (and trusted witness keys) to check its proofs" };
    const results = [];
    for (const proof of proofs) {
      results.push(await window.MirrorTransparency.verifyProof(verdict.action_hash, proof, trust.origin,
        trust.keys, trust.required, trust.orgId));
    }
    return { results: results, required: trust.required };
  }

  /** One proof (JSON text) against explicit trust inputs: for scripts and tests. */
  async function mirrorVerifyTransparencyProof(actionHash, proofText, origin, keys, required, orgId) {
    let proof;
    try {
      proof = core.parseJson(proofText);
    } catch (error) {
      return { valid: false, reason: "malformed", detail: error.message };
    }
    return window.MirrorTransparency.verifyProof(actionHash, proof, origin, keys, required, orgId);
  }

  const TOKEN_DOMAIN = core.utf8("heso-approval-token/v1\u0000");

  /**
   * A co-signed policy change: each vote token is an approval token (approvals.md §1-§3)
   * whose signed bytes are the statement's RFC 8785 bytes, with scope policy:deploy. An
   * approving vote counts when it verifies, its key is on the change's roster, and its key
   * has not counted already; the change is approved when quorum keys count.
   */
  async function mirrorVerifyPolicyApprovals(value) {
    const statement = value.statement;
    const problems = [];
    if (!statement || statement.type !== "countersign.policy_change/v1") {
      return { kind: "NotAPolicyChange", problems: ["no countersign.policy_change/v1 statement"], votes: [] };
    }
    const canonical = core.canonicalize(statement);
    if (value.statement_b64 !== undefined && core.b64encode(canonical) !== value.statement_b64) {
      problems.push("statement_b64 is not the statement's canonical bytes");
    }
    const roster = Array.isArray(value.roster) ? value.roster : [];
    const counted = new Set();
    const votes = [];
    for (const vote of value.votes || []) {
      const token = core.canonicalB64decode(vote.token_b64);
      const shown = { key: vote.key_id || vote.approver_public_key, ok: false };
      votes.push(shown);
      if (token === null || token.length < 141) {
        shown.detail = "the token is not base64 of an approval token";
        continue;
      }
      const view = new DataView(token.buffer, token.byteOffset, token.byteLength);
      const tag = token[40];
      const scopeEnd = 45 + view.getUint32(41);
      if (token.length !== scopeEnd + 96) {
        shown.detail = "the token's layout is wrong";
        continue;
      }
      let scope;
      try {
        scope = core.decodeUtf8(token.subarray(45, scopeEnd));
      } catch (error) {
        shown.detail = "the token's scope is not UTF-8";
        continue;
      }
      const signature = core.b64encode(token.subarray(scopeEnd, scopeEnd + 64));
      const publicKey = core.b64encode(token.subarray(scopeEnd + 64));
      const failure = await core.verifyEd25519(publicKey, signature,
        core.concat(TOKEN_DOMAIN, token.subarray(0, scopeEnd), canonical));
      shown.decision = tag === 1 ? "approved" : tag === 2 ? "rejected" : "invalid";
      if (failure !== null) shown.detail = "the signature does not verify over the statement";
      else if (scope !== "policy:deploy") shown.detail = `scope ${scope}, not policy:deploy`;
      else if (roster.length && !roster.includes(publicKey)) shown.detail = "the key is not on the roster";
      else if (publicKey !== vote.approver_public_key) shown.detail = "signed by another key than the one named";
      else {
        shown.ok = true;
        if (shown.decision === "approved") counted.add(publicKey);
      }
    }
    const quorum = Number(value.quorum || 0);
    const approved = problems.length === 0 && quorum > 0 && counted.size >= quorum;
    return { kind: approved ? "PolicyApproved" : "PolicyNotApproved", policy_id: statement.policy_id,
      policy_hash: statement.policy_hash, org: statement.org, quorum: quorum, approvals: counted.size,
      problems: problems, votes: votes };
  }

  /** Detects what was given and verifies it. */
  async function mirrorVerifyInput(text) {
    const trimmed = text.trim();
    if (!trimmed) return { type: "empty" };
    let parsed;
    let parseError = null;
    try {
      parsed = core.parseJson(text);
    } catch (error) {
      parseError = error;
    }
    if (parseError === null) {
      if (member(parsed, "statement") !== undefined && member(parsed, "votes") !== undefined) {
        return Object.assign({ type: "policy_approvals" }, await mirrorVerifyPolicyApprovals(toPlain(parsed)));
      }
      if (member(parsed, "entries") !== undefined && member(parsed, "head") !== undefined) {
        return Object.assign({ type: "chain_window" }, await core.verifyChainWindow(toPlain(parsed)));
      }
      if (Array.isArray(parsed)) {
        const verdicts = [];
        for (const element of parsed) verdicts.push(plain(await core.verifyReceiptValue(element)));
        let chain;
        try {
          chain = await core.verifySessionChain(parsed);
        } catch (error) {
          chain = { error: error.message };
        }
        return { type: "session_chain", verdicts: verdicts, chain: chain };
      }
      const verdict = plain(await core.verifyReceiptValue(parsed));
      return { type: "receipt", verdict: verdict, transparency: await transparencyOf(parsed, verdict) };
    }
    const lines = trimmed.split(/\r?\n/).filter((line) => line.trim() !== "");
    if (lines.length > 1) {
      return { type: "jsonl", verdicts: await mirrorVerifyMany(lines) };
    }
    return { type: "receipt", verdict: plain(await core.verifyReceipt(text)) };
  }

  // --- Rendering (textContent only: the input is never interpreted as HTML) ---------------

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
    for (const child of children || []) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function rows(pairs) {
    return el("table", {}, pairs.filter((p) => p[1] !== undefined && p[1] !== null).map((p) =>
      el("tr", {}, [el("th", {}, [p[0]]), el("td", { class: "mono" }, [String(p[1])])])));
  }

  /** The derived level, with a differing claim shown as a claim: "L0 (claimed L1)". */
  function levelText(verdict) {
    if (!verdict || !verdict.trust_level) return null;
    const claimed = verdict.claimed_trust_level;
    return claimed ? `${verdict.trust_level} (claimed ${claimed})` : verdict.trust_level;
  }

  function levelPill(verdict) {
    const text = levelText(verdict);
    return text ? [" ", el("span", { class: "pill", "data-level": verdict.trust_level }, [text])] : [];
  }

  // Each verdict name keeps its name (scripts and docs use it) and gains its sentence.
  const SENTENCES = {
    Valid: "the receipt verifies: its hash, signatures and trust level hold",
    Malformed: "the text is not a well-formed receipt of a known version",
    HashMismatch: "the content was changed after it was hashed: action_hash does not match",
    InvalidSignature: "a signature does not verify over the content",
    TrustLevelMismatch: "the claimed trust level is not what the signatures support",
    WrongAlgorithm: "the receipt names a signing algorithm this service does not accept",
    Unsupported: "the receipt uses a feature this service does not support",
    AnchorRequired: "the receipt needs a time anchor it does not carry",
    SelfApproval: "the approver's key is the operator's own: an agent cannot approve itself",
    ThresholdNotMet: "fewer approvers signed than the quorum requires",
    NoTrustedTime: "no trusted timestamp: captured_at is the agent's own claim",
    ChainValid: "every receipt in the window links to the one before it",
  };

  function explained(name) {
    return SENTENCES[name] ? `${name} (${SENTENCES[name]})` : name;
  }

  function verdictBox(title, verdict) {
    const ok = verdict.kind === "Valid";
    const claim = verdict.claimed_trust_level
      ? `${verdict.claimed_trust_level} is claimed, not derived: offline, without the org's approver keys, ` +
        `every lifecycle receipt derives ${verdict.trust_level} (server.md §1)`
      : undefined;
    return el("div", { class: "verdict " + (ok ? "ok" : "bad"), "data-kind": verdict.kind }, [
      el("div", {}, [title ? title + " — " : "", el("span", { class: "kind" }, [verdict.kind]), ...levelPill(verdict)]),
      SENTENCES[verdict.kind] ? el("div", { class: "note verdict-sentence" }, [SENTENCES[verdict.kind] + "."]) : "",
      rows([["detail", verdict.detail], ["claimed trust level", claim], ["action_hash", verdict.action_hash],
        ["receipt kind", verdict.receipt_kind], ["time status", verdict.time_status && explained(verdict.time_status)]]),
    ]);
  }

  function renderTransparency(out, transparency) {
    if (transparency === undefined) return;
    if (transparency.skipped) {
      out.append(el("p", { class: "note", id: "tlog-result", "data-kind": "skipped" }, ["Transparency proofs not checked: " + transparency.skipped + "."]));
      return;
    }
    transparency.results.forEach((result, index) => {
      out.append(el("div", { class: "verdict " + (result.valid ? "ok" : "bad"), "data-tlog": result.valid ? "valid" : result.reason }, [
        el("div", {}, [`Transparency proof #${index + 1} — `, el("span", { class: "kind" }, [result.valid ? "included" : result.reason])]),
        rows(result.valid
          ? [["org", result.org_id], ["leaf index", result.leaf_index], ["checkpoint size", result.checkpoint_size],
            ["epoch", result.epoch], ["trusted cosignatures", `${result.cosigned_by} (${transparency.required} required)`]]
          : [["detail", result.detail]]),
      ]));
    });
  }

  function render(result) {
    const out = document.getElementById("result");
    out.replaceChildren();
    out.dataset.type = result.type;
    if (result.type === "empty") return;
    if (result.type === "receipt") {
      out.dataset.summary = result.verdict.kind;
      out.append(verdictBox("Receipt", result.verdict));
      renderTransparency(out, result.transparency);
      return;
    }
    if (result.type === "jsonl" || result.type === "session_chain") {
      const valid = result.verdicts.filter((v) => v.kind === "Valid").length;
      out.dataset.summary = `${valid}/${result.verdicts.length}`;
      out.append(el("p", {}, [`${valid} of ${result.verdicts.length} receipt(s) verify.`]));
      if (result.chain) {
        const chain = result.chain;
        const box = verdictBox("Session chain", { kind: chain.kind || "Error", detail: chain.detail || chain.reason || chain.error });
        out.append(box);
      }
      result.verdicts.forEach((verdict, index) => out.append(verdictBox(`#${index + 1}`, verdict)));
      return;
    }
    if (result.type === "policy_approvals") {
      out.dataset.summary = result.kind;
      const ok = result.kind === "PolicyApproved";
      out.append(el("div", { class: "verdict " + (ok ? "ok" : "bad"), "data-kind": result.kind }, [
        el("div", {}, ["Policy change — ", el("span", { class: "kind" }, [result.kind])]),
        rows([["policy", result.policy_id], ["policy_hash", result.policy_hash], ["org", result.org],
          ["approvals", `${result.approvals} verified of ${result.quorum} required`]]),
        el("ul", {}, result.problems.map((p) => el("li", {}, [p]))),
      ]));
      for (const vote of result.votes) {
        out.append(el("div", { class: "verdict " + (vote.ok ? "ok" : "bad") }, [
          el("div", {}, [`${vote.key} — `, el("span", { class: "kind" }, [vote.ok ? vote.decision : "refused"])]),
          rows([["detail", vote.detail]]),
        ]));
      }
      return;
    }
    if (result.type === "chain_window") {
      out.dataset.summary = result.kind;
      const ok = result.kind === "ChainValid";
      out.append(el("div", { class: "verdict " + (ok ? "ok" : "bad"), "data-kind": result.kind }, [
        el("div", {}, ["Chain window — ", el("span", { class: "kind" }, [result.kind])]),
        rows([["entries", result.entries.length], ["seq range", `${result.oldest_seq} … ${result.newest_seq}`],
          ["head checked", result.head_checked ? "yes (the window holds the newest entry)" : "no (older window)"]]),
        el("ul", {}, result.problems.map((p) => el("li", {}, [p]))),
      ]));
      for (const entry of result.entries.slice().reverse()) {
        out.append(el("div", { class: "verdict " + (entry.ok ? "ok" : "bad") }, [
          el("div", {}, [`seq ${entry.seq} — `, el("span", { class: "kind" }, [entry.ok ? "intact" : "broken"]),
            ...levelPill(entry.verdict)]),
          rows([["action_hash", entry.action_hash], ["chain_hash", entry.chain_hash]]),
          el("ul", {}, entry.problems.map((p) => el("li", {}, [p]))),
          el("ul", { class: "note" }, (entry.notes || []).map((n) => el("li", {}, [n]))),
        ]));
      }
    }
  }

  async function run(text) {
    let result;
    try {
      result = await mirrorVerifyInput(text);
    } catch (error) {
      result = { type: "receipt", verdict: { kind: "Error", detail: error.message } };
    }
    render(result);
    return result;
  }

  function readFile(file) {
    file.arrayBuffer().then((buffer) => {
      let text;
      try {
        text = core.decodeUtf8(new Uint8Array(buffer));
      } catch (error) {
        render({ type: "receipt", verdict: { kind: "Malformed", detail: "input is not a well-formed action receipt: " + error.message } });
        return;
      }
      document.getElementById("input").value = text;
      run(text);
    });
  }

  window.mirrorVerify = mirrorVerify;
  window.mirrorVerifyMany = mirrorVerifyMany;
  window.mirrorCanonical = mirrorCanonical;
  window.mirrorLinkHash = mirrorLinkHash;
  window.mirrorVerifySessionChain = mirrorVerifySessionChain;
  window.mirrorVerifyInput = mirrorVerifyInput;
  window.mirrorVerifyPolicyApprovals = mirrorVerifyPolicyApprovals;
  window.mirrorVerifyTransparencyProof = mirrorVerifyTransparencyProof;

  document.addEventListener("DOMContentLoaded", () => {
    const input = document.getElementById("input");
    const drop = document.getElementById("drop");
    if (!input) return;
    document.getElementById("verify").addEventListener("click", () => run(input.value));
    document.getElementById("clear").addEventListener("click", () => {
      input.value = "";
      render({ type: "empty" });
    });
    document.getElementById("file").addEventListener("change", (event) => {
      if (event.target.files.length) readFile(event.target.files[0]);
    });
    drop.addEventListener("dragover", (event) => {
      event.preventDefault();
      drop.classList.add("over");
    });
    drop.addEventListener("dragleave", () => drop.classList.remove("over"));
    drop.addEventListener("drop", (event) => {
      event.preventDefault();
      drop.classList.remove("over");
      if (event.dataTransfer.files.length) readFile(event.dataTransfer.files[0]);
    });
  });
})();
