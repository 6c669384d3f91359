"""SCIM 2.0 provisioning (RFC 7643/7644) on django-scim2: an org's identity provider creates,
changes, deactivates and deletes its people and groups at ``/scim/v2/``, with the org's
bearer token; groups give roles, and deprovisioning ends the membership, the sessions and
the approver keys in one transaction (``apps.approvals.services.members``)."""
