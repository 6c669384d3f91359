"""The console's browser pages: the receipt verifier and the approver page.

The pages are static shells: verification and signing run in the browser
(static/console/*.js). The verifier page gets a Content-Security-Policy that forbids every
network request from its scripts, so what is pasted into it cannot leave the browser.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

# No connect-src, form-action or navigation target besides this origin's own pages; the
# verifier's scripts may not fetch, post or open sockets at all.
VERIFY_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'none'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"
)


@require_GET
def verify_page(request: HttpRequest) -> HttpResponse:
    response = render(request, "console/verify.html")
    response["Content-Security-Policy"] = VERIFY_CSP
    response["Referrer-Policy"] = "no-referrer"
    return response
