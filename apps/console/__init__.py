"""The operator console beyond plain admin pages: the org admin with its dashboard,
evidence download and session tokens (``admin``), the approver's signing page and the
browser verifier (``views``, templates and static scripts), and the demo ``make run``
seeds (``demo``).
"""
