"""Django-level error views, so even unrouted paths answer in the profile's error body."""

from __future__ import annotations

from http import HTTPStatus

from django.http import HttpRequest, JsonResponse


def keyscoped_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"detail": "not found"}, status=HTTPStatus.NOT_FOUND)


def keyscoped_bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"detail": "bad request"}, status=HTTPStatus.BAD_REQUEST)


def keyscoped_server_error(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        {"detail": "internal server error"}, status=HTTPStatus.INTERNAL_SERVER_ERROR
    )


def teampath_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse({"error": "not_found", "message": "not found"}, status=HTTPStatus.NOT_FOUND)


def teampath_bad_request(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(
        {"error": "bad_request", "message": "bad request"}, status=HTTPStatus.BAD_REQUEST
    )


def teampath_server_error(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        {"error": "internal_error", "message": "internal server error"},
        status=HTTPStatus.INTERNAL_SERVER_ERROR,
    )
