"""A small standard-library client of the team-path API (no Django, no third-party packages).

>>> client = TeamPathClient("https://mirror.example.com", api_key, "acme")
>>> client.fetch_policy()["version"]
>>> client.push_receipt(receipt)          # {"receiptId", "accepted", "rejectionReason"?}
"""

from clients.teampath.client import TeamPathClient, TeamPathError

__all__ = ["TeamPathClient", "TeamPathError"]
