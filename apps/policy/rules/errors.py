"""The one error the loader raises internally.

Both stages of parsing (the TOML text of policy.md §3 and the rule model of §§1-2) report
failure with :class:`PolicyParseError`; :func:`~apps.policy.rules.loading.load_policy` turns
it into a ``parse_error`` outcome (HTTP 422), so callers never see it.
"""

from __future__ import annotations


class PolicyParseError(ValueError):
    """The document is not a loadable policy; the message says where and why."""
