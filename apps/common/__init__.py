"""The ground floor: what every app may use, importing no other app.

Domain errors and the two error bodies (``errors``, ``responses``), the strict JSON reader
(``json_body``, ``json_text``), the receipt format's words (``vocabulary``), the outbound
event hook services call (``outbound``), metrics, request logging, capacity and request
guards (middleware), health and readiness probes, and the OpenAPI pieces no serializer
states (``openapi``).
"""
