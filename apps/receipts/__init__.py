"""The receipt mirror: ``verifier/`` (pure Python, byte-exact decoding and re-verification),
the per-org append-only chain (``services``: the one append path, single and batch, and the
refusal counter; ``append_sql``: its statements), and reads such as the chain head and the
chain check (``selectors``).
"""
