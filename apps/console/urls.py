"""Console page routes, included by both profiles' root URL confs."""

from django.urls import path

from apps.console import views

urlpatterns = [
    path("verify", views.verify_page, name="console-verify"),
]
