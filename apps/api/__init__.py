"""The two profiles' HTTP layer, above every feature app.

``base`` holds what both profiles share (the rate-limit step, the validation sentence);
``keyscoped`` and ``teampath`` each fix their authentication, throttling and their one
error contract (``{"detail"}`` and ``{"error", "message"}``); ``handlers`` answers what no
profile base class sees (the probes, unrouted paths, 500s) in the deployment's profile.
DRF's authentication, permission and throttle classes (``authentication``, ``permissions``,
``throttles``) and its JSON parser (``parsers``) sit over ``apps.tenancy``'s credential
rules; the OpenAPI description (``openapi``, ``openapi_events``, ``schema_views``) and the
probes (``health``) are here too.
Feature apps' ``apis.py`` modules subclass these bases; nothing below imports this package.
"""
