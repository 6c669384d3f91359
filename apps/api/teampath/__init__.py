"""The team-path profile (the team id in the path): ``base`` fixes Bearer authentication,
throttling and the ``{"error", "message"}`` error contract; one module per feature holds its
routes."""
