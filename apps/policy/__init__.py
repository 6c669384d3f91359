"""Policy: ``rules/`` (pure Python: TOML 1.1 parse, the dangerous-lane floor, evaluation,
JSON rendering, hashing), deployments with their history (``services.policy_deploy``: the
one write path), the active policy (``selectors``) and the deploy preview.
"""
