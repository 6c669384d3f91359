"""Console page routes, included by both profiles' root URL confs."""

from typing import Any

from django.urls import path, reverse
from django.views.generic import RedirectView

from apps.console import accounts, sso_views, views


class ApprovalQueueRedirect(RedirectView):
    """``/approvals``: the path the heso SDK prints after ``{HESO_CONSOLE_URL}`` for a
    suspended action. It leads to the console's queue of pending approvals (the console's
    login first, when not signed in), where the action's hash is searchable."""

    def get_redirect_url(self, *args: Any, **kwargs: Any) -> str:
        return reverse("admin:approvals_approval_changelist") + "?status__exact=pending"


urlpatterns = [
    path("approvals", ApprovalQueueRedirect.as_view(), name="console-approvals"),
    path("verify", views.verify_page, name="console-verify"),
    path("approve/", views.approver_key_page, name="console-approver-key"),
    path("approve/devices/challenge", views.device_challenge, name="console-device-challenge"),
    path("approve/devices", views.device_enroll, name="console-device-enroll"),
    path("approve/devices/<int:key_pk>/label", views.device_label, name="console-device-label"),
    path("approve/devices/<int:key_pk>/revoke", views.device_revoke, name="console-device-revoke"),
    path(
        "approve/policy/<str:policy_id>",
        views.policy_proposal_page,
        name="console-policy-proposal",
    ),
    path(
        "approve/policy/<str:policy_id>/vote",
        views.policy_proposal_vote_endpoint,
        name="console-policy-proposal-vote",
    ),
    path("approve/<str:ref>", views.approval_page, name="console-approval"),
    path("approve/<str:ref>/vote", views.approval_vote_endpoint, name="console-approval-vote"),
    path("invitations/<str:token>", accounts.invitation_page, name="console-invitation"),
    path("sso/", sso_views.sso_page, name="console-sso"),
    path("sso/start", sso_views.SsoStartView.as_view(), name="console-sso-start"),
    path("sso/callback", sso_views.SsoCallbackView.as_view(), name="console-sso-callback"),
]
