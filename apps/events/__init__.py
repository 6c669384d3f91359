"""Outbound events: endpoints, Standard Webhooks signing and delivery with retries, Slack
text, email opt-ins, the delivery log, and the task engine's worker with its periodic work
(approval expiry, the transparency log's epochs, background evidence exports). Services on
lower floors record events through ``apps.common.outbound``.
"""
