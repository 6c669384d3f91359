"""Console page routes, included by both profiles' root URL confs."""

from typing import Any

from django.urls import path, reverse
from django.views.generic import RedirectView

from apps.console import views


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
]
