"""The SCIM 2.0 routes (django-scim2's), included by both profiles' root URL confs."""

from django.urls import include, path

urlpatterns = [path("scim/v2/", include("django_scim.urls", namespace="scim"))]
