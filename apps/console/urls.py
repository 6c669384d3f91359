"""Console page routes, included by both profiles' root URL confs."""

from django.urls import path

from apps.console import views

urlpatterns = [
    path("verify", views.verify_page, name="console-verify"),
    path("approve/", views.approver_key_page, name="console-approver-key"),
    path("approve/<str:ref>", views.approval_page, name="console-approval"),
    path("approve/<str:ref>/vote", views.approval_vote_endpoint, name="console-approval-vote"),
]
