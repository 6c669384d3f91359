"""The receipt mirror: ``verifier/`` (pure Python, byte-exact decoding and re-verification),
the per-org append-only chain (``services``: the one append path, single and batch, and the
refusal counter; ``append_sql``: its statements), and reads such as the chain head and the
chain check (``selectors``).

Receipt intake, the SDK's push as one use case (verify with the trust level the org's
approver keys give, count a refusal, append, open the approval a suspended receipt waits
for), is ``apps.approvals.services.intake``, one floor up: it reads approver keys and opens
approvals, which this app, below approvals, does not know.
"""
