/*
 * The signing page of a co-signed policy change. The statement is recomputed here from the
 * page's data: its RFC 8785 bytes (receipt-core.js) must equal the server's statement_b64,
 * and they are what the vote token signs (scope policy:deploy) with this browser's
 * non-extractable approver key and posted as the approval page's vote is (approver.js, loaded
 * first: window.mirrorApprover.signToken, submitVote and fillRows).
 */
(function () {
  "use strict";

  const core = window.MirrorCore;
  const state = { page: null, canonical: null, busy: false };

  function $(id) {
    return document.getElementById(id);
  }

  // A table of name/value rows, as the approval page renders its own (approver.js).
  const fillRows = window.mirrorApprover.fillRows;

  function render() {
    const page = state.page;
    $("status").textContent = page.status;
    $("status").className = `pill status-${page.status}`;
    document.body.dataset.status = page.status;
    $("quorum").textContent = String(page.quorum);
    fillRows($("proposal"), [
      ["policy", page.policy_id],
      ["org", page.org],
      ["replaces", page.statement.previous_policy_hash || "(the fail-safe empty policy)"],
      ["proposed by", page.proposed_by],
      ["approvals", `${page.approved_count} of ${page.quorum}`],
      ["break-glass", page.break_glass_reason],
      ["roster", (page.roster || []).join("\n")],
    ]);
    $("diff").textContent = page.diff || "(identical)";
    $("statement").textContent = core.decodeUtf8(state.canonical || new Uint8Array());
    const votes = $("votes");
    votes.replaceChildren();
    if (!page.votes.length) fillRows(votes, [["—", "nobody has voted yet"]]);
    else fillRows(votes, page.votes.map((v) => [v.decision, `${v.key_id || v.approver_public_key} at ${v.voted_at}`]));
    updateButtons();
  }

  async function updateButtons() {
    const page = state.page;
    const mine = await window.mirrorApprover.publicKey();
    let reason = "";
    if (!state.canonical) reason = "The statement does not match the server's bytes: voting is disabled.";
    else if (!page.takes_votes) reason = `This proposal is ${page.status}: it takes no votes.`;
    else if (!mine) reason = "Create your approver key first.";
    else if (page.votes.some((v) => v.approver_public_key === mine)) reason = "You have already voted.";
    const enabled = reason === "" && !state.busy;
    $("approve").disabled = !enabled;
    $("reject").disabled = !enabled;
    if (!$("vote-result").dataset.outcome) $("vote-result").textContent = reason;
    document.body.dataset.ready = enabled ? "yes" : "no";
  }

  async function vote(decision) {
    state.busy = true;
    updateButtons();
    const approver = window.mirrorApprover;
    const signed = async () => ({ token: await approver.signToken(decision, state.page.scope, state.canonical) });
    await approver.submitVote(state.page, decision, signed, $("vote-result"));
    state.busy = false;
    render();
  }

  function init() {
    const data = $("proposal-data");
    if (!data) return;
    state.page = JSON.parse(data.textContent);
    const canonical = core.canonicalize(state.page.statement);
    if (core.b64encode(canonical) === state.page.statement_b64) {
      state.canonical = canonical;
      $("integrity").textContent = "Checked in this browser: these are exactly the bytes your vote signs.";
    } else {
      $("integrity").textContent = "The statement's canonical bytes differ from the server's: do not vote.";
      $("integrity").className = "bad";
    }
    $("approve").addEventListener("click", () => vote("approved"));
    $("reject").addEventListener("click", () => vote("rejected"));
    render();
  }

  document.addEventListener("DOMContentLoaded", init);
})();
