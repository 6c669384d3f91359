"""The key-scoped profile (the org comes from the API key): ``base`` fixes authentication,
throttling and the ``{"detail"}`` error contract; one module per feature holds its routes."""
