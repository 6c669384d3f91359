"""Orgs, plans and limits, API keys (hashed), console members and roles, credentials
(API keys, dashboard session tokens, failed-credential limits, the rate limiter's buckets;
DRF's classes over them live in ``apps.api``), the org context that
row-level security reads, and the org's audit trail (``audit_trail``). Services in
``services``, reads in ``selectors``.
"""
