"""Human approvals, k-of-n: ``tokens/`` (pure Python: approval tokens, co-signature legs,
L1 assembly), ``services/`` (approver keys, opening, voting, expiry, and the receipt intake
use case), ``selectors`` (reads, which never write), ``content`` (pure functions of a
suspended receipt's content). The service verifies and relays; it never signs.
"""
