"""The ground floor: what every app may use, importing no other app.

Domain errors and the two error bodies (``errors``, ``responses``), the strict JSON reader
(``json_body``, ``json_text``), the receipt format's words (``vocabulary``), the outbound
event hook services call (``outbound``), metrics, request logging, capacity and request
guards (middleware) and the readiness checks. Nothing here speaks DRF: the HTTP side
(parsers, probes, the OpenAPI description) lives in ``apps.api``.
"""
