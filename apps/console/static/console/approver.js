/*
 * The approver's device, in the browser: an Ed25519 key created with WebCrypto as a
 * NON-extractable key and kept in IndexedDB (it can sign, nobody can read it out), and the
 * approval page that shows the suspended action in full and signs a vote on it:
 *
 *   token   = nonce || expiry || decision_tag || scope_len || scope || sig || public key,
 *             sig over "heso-approval-token/v1\0" || those fields || C(suspended content)
 *             (approvals.md §1-2), scope = the approval's rule_id;
 *   leg     = the ApproverRecord JSON text and a co-signature over the §5 payload (single
 *             lane, threshold 1) or the §6 payload (quorum lane), key-scoped approvals.
 *
 * Every byte is built by receipt-core.js, the same code the verifier page runs. Exposed for
 * tests: window.mirrorApprover.{publicKey, tokenMessageHex, l1PayloadHex, quorumPayloadHex},
 * and signToken, submitVote and fillRows for the signing page of a policy change (policy-approver.js).
 *
 * On the devices page (/approve/, signed in) the member enrolls this browser's key: the
 * server issues a one-time challenge, the key signs
 *   "countersign-approver-enrollment/v1\0" || challenge || raw public key || org slug
 * and the server registers the key, bound to the member, pending confirmation. The page also
 * relabels and revokes the member's keys (a lost device: revoke it, or enroll its
 * replacement, which revokes it in the same step).
 *
 * The server sends the action only while the approval takes votes; a settled or expired one
 * is rendered as its outcome alone (approval.html). When a vote settles it, this page turns
 * into that same outcome view.
 */
(function () {
  "use strict";

  const core = window.MirrorCore;
  const DB_NAME = "receipt-mirror-approver";
  const STORE = "keys";
  const SLOT = "default";
  const TOKEN_LIFETIME_SECONDS = 600;

  // --- The key in IndexedDB ----------------------------------------------------------------

  // "1 of 2 eligible approvers (one signature finalizes it)": the threshold in words.
  function thresholdWords(threshold, eligible, lane) {
    const how = lane === "single" ? "one signature finalizes it" : "a quorum, each approver signing";
    return `${threshold} of ${eligible} eligible approver${eligible === 1 ? "" : "s"} (${how})`;
  }

  function openDb() {
    return new Promise((resolve, reject) => {
      const request = indexedDB.open(DB_NAME, 1);
      request.onupgradeneeded = () => request.result.createObjectStore(STORE);
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  }

  async function dbCall(mode, action) {
    const db = await openDb();
    try {
      return await new Promise((resolve, reject) => {
        const request = action(db.transaction(STORE, mode).objectStore(STORE));
        request.onsuccess = () => resolve(request.result);
        request.onerror = () => reject(request.error);
      });
    } finally {
      db.close();
    }
  }

  async function loadKey() {
    return (await dbCall("readonly", (store) => store.get(SLOT))) || null;
  }

  async function createKey() {
    const existing = await loadKey();
    if (existing) return existing;
    // extractable = false: the private key can sign but can never be exported.
    const pair = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
    const raw = new Uint8Array(await crypto.subtle.exportKey("raw", pair.publicKey));
    const record = {
      privateKey: pair.privateKey,
      publicKey: pair.publicKey,
      publicB64: core.b64encode(raw),
      createdAt: new Date().toISOString(),
    };
    await dbCall("readwrite", (store) => store.put(record, SLOT));
    return record;
  }

  async function sign(key, message) {
    return new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, key.privateKey, message));
  }

  // --- Bytes (for tests: the same builders the vote uses) -----------------------------------

  function tokenMessageHex(nonceHex, expiry, decision, scope, canonicalHex) {
    return core.toHex(core.approvalTokenMessage(core.fromHex(nonceHex), expiry, decision, scope, core.fromHex(canonicalHex)));
  }

  function payloadOrError(build) {
    try {
      return { ok: true, payload_hex: core.toHex(build()) };
    } catch (error) {
      if (error instanceof core.CosignError) return { ok: false, error: error.message };
      throw error;
    }
  }

  function l1PayloadHex(suspendedText, recordText) {
    return payloadOrError(() => core.l1CosignPayload(suspendedText, recordText));
  }

  function quorumPayloadHex(suspendedText, threshold, roster, recordText) {
    return payloadOrError(() => core.quorumCosignPayload(suspendedText, threshold, roster, recordText));
  }

  /** An approval token over ``canonical`` (the bytes A) signed with this browser's key:
   *  the same bytes as a vote on an action, for another statement (a policy change). */
  async function signToken(decision, scope, canonical) {
    const key = await loadKey();
    if (!key) throw new Error("this browser holds no approver key");
    const nonce = crypto.getRandomValues(new Uint8Array(32));
    const expiry = Math.floor(Date.now() / 1000) + TOKEN_LIFETIME_SECONDS;
    const signature = await sign(key, core.approvalTokenMessage(nonce, expiry, decision, scope, canonical));
    const token = core.encodeApprovalToken(nonce, expiry, decision, scope, signature, core.canonicalB64decode(key.publicB64));
    return core.b64encode(token);
  }

  /** Build a vote's body, POST it to ``page.vote_url`` and say in ``result`` how it went: the
   *  answer (the new state) is merged into ``page``. Never throws (a failure is said in
   *  ``result``). The vote of an approval and of a policy change (policy-approver.js) alike. */
  async function submitVote(page, decision, buildBody, result) {
    try {
      const body = await buildBody();
      const response = await fetch(page.vote_url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": page.csrf_token },
        body: JSON.stringify(body),
      });
      const answer = await response.json();
      if (!response.ok) {
        result.dataset.outcome = "refused";
        result.textContent = `Refused (${response.status} ${answer.error || ""}): ${answer.message || answer.detail}`;
      } else {
        Object.assign(page, answer);
        result.dataset.outcome = "recorded";
        result.textContent = `Your ${decision === "approved" ? "approval" : "rejection"} was recorded.`;
      }
    } catch (error) {
      result.dataset.outcome = "error";
      result.textContent = `Could not vote: ${error.message}`;
    }
  }

  window.mirrorApprover = {
    publicKey: async () => {
      const key = await loadKey();
      return key ? key.publicB64 : null;
    },
    createKey: async () => (await createKey()).publicB64,
    signToken: signToken,
    submitVote: submitVote,
    fillRows: fillRows,
    tokenMessageHex: tokenMessageHex,
    l1PayloadHex: l1PayloadHex,
    quorumPayloadHex: quorumPayloadHex,
  };

  // --- Rendering ---------------------------------------------------------------------------

  function $(id) {
    return document.getElementById(id);
  }

  // An approver as people know them: the person and device ("Alice Doe (work laptop)"),
  // never the raw key (a key the org does not know is shown shortened).
  function keyName(publicKey) {
    const name = (state.page.key_names || {})[publicKey];
    return name || `unknown key ${publicKey.slice(0, 10)}…`;
  }

  function fillRows(table, pairs) {
    table.replaceChildren();
    for (const [name, value] of pairs) {
      if (value === undefined || value === null || value === "") continue;
      const row = document.createElement("tr");
      const th = document.createElement("th");
      th.textContent = name;
      const td = document.createElement("td");
      td.textContent = String(value);
      td.className = "mono";
      row.append(th, td);
      table.append(row);
    }
  }

  function pretty(value) {
    return JSON.stringify(value, (name, member) => (typeof member === "bigint" ? Number(member) : member), 2);
  }

  async function showKey() {
    const key = await loadKey();
    $("key-missing").hidden = key !== null;
    $("key-present").hidden = key === null;
    if (key) {
      $("public-key").textContent = key.publicB64;
      $("key-created").textContent = key.createdAt;
    }
    document.body.dataset.key = key ? "ready" : "missing";
    return key;
  }

  // --- The approval page -------------------------------------------------------------------

  const state = { page: null, content: null, canonical: null, key: null, busy: false };

  function checkContent(page) {
    try {
      const content = core.decodeContent(core.parseJson(page.suspended_content));
      const canonical = core.contentBytes(content);
      const hash = core.blake3Hex(canonical);
      if (hash !== page.action_hash) return { error: `the content hashes to ${hash}, not to the approval's action_hash` };
      return { content: content, canonical: canonical };
    } catch (error) {
      return { error: `the suspended content does not decode: ${error.message}` };
    }
  }

  /** The settled approval's outcome, as approval.html renders it: nothing of the action. */
  function renderOutcome() {
    const page = state.page;
    if ($("outcome")) return;
    // Forget the action: nothing of it stays on the page or in its state.
    state.content = null;
    state.canonical = null;
    page.suspended_content = "";
    for (const id of ["approval-data", "integrity", "action-details", "voting"]) {
      if ($(id)) $(id).remove();
    }
    $("heading").textContent = "Approval";
    $("status").textContent = page.status;
    $("status").className = `pill status-${page.status}`;
    document.title = `Approval ${page.status} — Receipt mirror`;
    document.body.dataset.status = page.status;
    document.body.dataset.ready = "no";
    const note = document.createElement("p");
    note.id = "closed";
    note.className = "note";
    note.textContent =
      `This approval is settled: it was ${page.status}. ` +
      "It takes no more votes, and the action it was about is no longer shown here.";
    const section = document.createElement("section");
    section.id = "outcome";
    section.dataset.state = page.status;
    const heading = document.createElement("h2");
    heading.textContent = "Outcome";
    const table = document.createElement("table");
    section.append(heading, table);
    fillRows(table, [
      ["approval", page.approval_id],
      ["status", page.status + (page.flag ? ` (${page.flag})` : "")],
      ["decided at", page.resolved_at],
      ["expires at", page.expires_at],
      ["threshold", thresholdWords(page.threshold, page.roster.length, page.lane)],
      ["approvals", String(page.approved_count)],
      ["rejections", String(page.votes.filter((v) => v.decision === "rejected").length)],
    ]);
    $("status").closest("h1").after(note, section);
  }

  function renderApproval() {
    const page = state.page;
    if (page.status !== "pending") {
      renderOutcome();
      return;
    }
    const content = state.content;
    $("status").textContent = page.status + (page.flag ? ` (${page.flag})` : "");
    $("status").className = `pill status-${page.status}`;
    document.body.dataset.status = page.status;
    if (content) {
      const action = content.action;
      fillRows($("action"), [
        ["verb", action.verb],
        ["tool", action.tool_name],
        ["target host", action.target_host],
        ["domain / action", [action.domain, action.action].filter(Boolean).join(" / ")],
        ["workflow", action.workflow],
        ["account", action.account],
        ["agent (operator key)", content.agent_identity],
        ["captured at", content.captured_at],
        ["receipt kind", content.kind || "action"],
        ["action_hash", page.action_hash],
      ]);
      $("fields").textContent = pretty(action.fields);
      const policy = content.policy;
      fillRows($("policy"), [
        ["rule", policy.rule_id],
        ["rule text", policy.rule_display],
        ["decision", policy.decision_path],
        ["matched", policy.matched_conditions.map((c) => `${c.field} ${c.op} ${pretty(c.value)}`).join("; ")],
        ["guardrail", content.guardrail ? pretty(content.guardrail) : null],
      ]);
    }
    fillRows($("approval"), [
      ["approval", page.approval_id],
      ["requested threshold", thresholdWords(page.threshold, page.roster.length, page.lane)],
      ["approved so far", page.approved_count],
      ["scope (rule_id)", page.rule_id],
      ["workflow", page.workflow],
      ["expires at", page.expires_at],
      ["resolved at", page.resolved_at],
      ["roster", page.roster.length ? page.roster.map(keyName).join("\n") : "no eligible approver keys yet"],
    ]);
    if ($("roster-rule")) $("roster-rule").textContent = page.roster_rule;
    const votes = $("votes");
    votes.replaceChildren();
    if (!page.votes.length) fillRows(votes, [["—", "nobody has voted yet"]]);
    for (const vote of page.votes) {
      const label = vote.approver || keyName(vote.approver_public_key);
      const row = document.createElement("tr");
      const who = document.createElement("th");
      who.textContent = vote.decision;
      const what = document.createElement("td");
      what.className = "mono";
      what.textContent = `${label} at ${vote.voted_at}`;
      row.append(who, what);
      votes.append(row);
    }
    updateButtons();
  }

  function updateButtons() {
    const page = state.page;
    const key = state.key;
    let reason = "";
    if (!state.content) reason = "The suspended content cannot be checked: voting is disabled.";
    else if (page.status !== "pending") reason = `This approval is ${page.status}.`;
    else if (!key) reason = "Create your approver key first.";
    else if ((page.your_keys || {})[key.publicB64] === "pending")
      reason = "This browser's key is enrolled but waits for an owner or manager to confirm it.";
    else if ((page.your_keys || {})[key.publicB64] === "revoked") reason = "This browser's key is revoked.";
    else if (!page.roster.includes(key.publicB64)) reason = "Your key is not on this approval's roster.";
    else if (page.votes.some((v) => v.approver_public_key === key.publicB64)) reason = "You have already voted.";
    const enabled = reason === "" && !state.busy;
    $("approve").disabled = !enabled;
    $("reject").disabled = !enabled;
    if (reason && !$("vote-result").dataset.outcome) $("vote-result").textContent = reason;
    if (!reason && !$("vote-result").dataset.outcome) $("vote-result").textContent = "";
    document.body.dataset.ready = enabled ? "yes" : "no";
  }

  function recordText(decision, publicB64) {
    return JSON.stringify({
      decision: decision,
      approver_identity: publicB64,
      reason: $("reason").value,
      decided_at: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    });
  }

  async function buildVote(decision) {
    const page = state.page;
    const key = state.key;
    const nonce = crypto.getRandomValues(new Uint8Array(32));
    const expiry = Math.floor(Date.now() / 1000) + TOKEN_LIFETIME_SECONDS;
    const message = core.approvalTokenMessage(nonce, expiry, decision, page.rule_id, state.canonical);
    const signature = await sign(key, message);
    const publicKey = core.canonicalB64decode(key.publicB64);
    const token = core.encodeApprovalToken(nonce, expiry, decision, page.rule_id, signature, publicKey);
    const body = { token: core.b64encode(token) };
    if (page.with_leg && decision === "approved") {
      const record = recordText(decision, key.publicB64);
      const payload =
        page.lane === "single"
          ? core.l1CosignPayload(page.suspended_content, record)
          : core.quorumCosignPayload(page.suspended_content, page.threshold, page.roster, record);
      body.record = record;
      body.co_sig_b64 = core.b64encode(await sign(key, payload));
    }
    return body;
  }

  async function vote(decision) {
    state.busy = true;
    updateButtons();
    await submitVote(state.page, decision, () => buildVote(decision), $("vote-result"));
    state.busy = false;
    renderApproval();
  }

  // --- The devices page ----------------------------------------------------------------------

  function enrollmentMessage(challengeB64, publicB64, orgSlug) {
    const parts = [
      new TextEncoder().encode("countersign-approver-enrollment/v1\0"),
      core.canonicalB64decode(challengeB64),
      core.canonicalB64decode(publicB64),
      new TextEncoder().encode(orgSlug),
    ];
    const message = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
    let offset = 0;
    for (const part of parts) {
      message.set(part, offset);
      offset += part.length;
    }
    return message;
  }

  async function post(url, body, csrf) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(body || {}),
    });
    const answer = await response.json();
    if (!response.ok) throw new Error(`${response.status} ${answer.error}: ${answer.message}`);
    return answer;
  }

  async function enroll(devices) {
    const result = $("enroll-result");
    $("enroll-key").disabled = true;
    try {
      const key = state.key || (await createKey());
      state.key = await showKey();
      const org = $("enroll-org").value;
      const { challenge } = await post(devices.challenge_url, {}, devices.csrf_token);
      const signature = await sign(key, enrollmentMessage(challenge, key.publicB64, org));
      const body = {
        org: org,
        label: $("enroll-label").value,
        public_key: key.publicB64,
        signature: core.b64encode(signature),
      };
      if ($("enroll-replaces").value) body.replaces = Number($("enroll-replaces").value);
      const enrolled = await post(devices.enroll_url, body, devices.csrf_token);
      result.dataset.outcome = "enrolled";
      result.textContent = `Enrolled as ${enrolled.key_id}: ${enrolled.state === "pending" ? "pending confirmation by an owner or manager" : enrolled.state}.`;
      window.location.reload();
    } catch (error) {
      result.dataset.outcome = "refused";
      result.textContent = `Could not enroll: ${error.message}`;
      $("enroll-key").disabled = false;
    }
  }

  function initDevices(devices) {
    const mine = state.key ? state.key.publicB64 : null;
    for (const row of document.querySelectorAll("#device-list tbody tr")) {
      if (row.dataset.publicKey === mine) row.querySelector(".this-browser").hidden = false;
      const id = row.dataset.key;
      const save = row.querySelector(".save-label");
      const revoke = row.querySelector(".revoke-key");
      const report = (text, outcome) => {
        $("device-result").textContent = text;
        $("device-result").dataset.outcome = outcome;
      };
      if (save) {
        save.addEventListener("click", async () => {
          try {
            await post(`${devices.enroll_url}/${id}/label`, { label: row.querySelector(".device-label").value }, devices.csrf_token);
            report("Label saved.", "saved");
          } catch (error) {
            report(`Could not save the label: ${error.message}`, "refused");
          }
        });
      }
      if (revoke) {
        revoke.addEventListener("click", async () => {
          try {
            await post(`${devices.enroll_url}/${id}/revoke`, {}, devices.csrf_token);
            window.location.reload();
          } catch (error) {
            report(`Could not revoke: ${error.message}`, "refused");
          }
        });
      }
    }
    const enrolled = mine !== null && devices.devices.some((d) => d.public_key === mine && d.state !== "revoked");
    $("enroll-key").disabled = enrolled;
    if (enrolled) $("enroll-result").textContent = "This browser's key is enrolled (see below).";
    $("enroll-key").addEventListener("click", () => enroll(devices));
    document.body.dataset.devices = "ready";
  }

  async function init() {
    if ($("create-key")) {
      $("create-key").addEventListener("click", async () => {
        try {
          await createKey();
        } catch (error) {
          $("key-error").hidden = false;
          $("key-error").textContent = `Could not create a key: ${error.message}`;
        }
        state.key = await showKey();
        if (state.page) updateButtons();
      });
    }
    state.key = await showKey();
    const devices = $("devices-data");
    if (devices) {
      const page = JSON.parse(devices.textContent);
      if (page.signed_in) initDevices(page);
      return;
    }
    const data = $("approval-data");
    if (!data) return;
    state.page = JSON.parse(data.textContent);
    const checked = checkContent(state.page);
    if (checked.error) {
      $("integrity").textContent = checked.error;
      $("integrity").className = "bad";
    } else {
      state.content = checked.content;
      state.canonical = checked.canonical;
      $("integrity").textContent =
        "Checked in this browser: the content shown hashes to the approval's action_hash, and it is exactly what your vote signs.";
    }
    $("approve").addEventListener("click", () => vote("approved"));
    $("reject").addEventListener("click", () => vote("rejected"));
    renderApproval();
  }

  document.addEventListener("DOMContentLoaded", init);
})();
