"""DRF's side of the one set of JSON body rules (``apps.common.json_body``): the parser of
every DRF-parsed route and the content negotiation that hands it every ``+json`` type."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.request import Request

from apps.common.json_body import body_limit, declared_length, is_json_media_type, too_large
from apps.common.json_text import JsonTextError, parse_plain_json


class StrictJsonParser(BaseParser):
    """DRF's parser for every DRF-parsed route: the rules of ``json_body``, plain bodies.

    Not a subclass of DRF's ``JSONParser``: DRF reads ``request.body`` for those before
    parsing, which is where an oversize body became Django's HTML 400 (logged at ERROR).
    This one reads the stream itself, at most one byte past the limit.
    """

    media_type = "application/json"

    def parse(
        self,
        stream: IO[Any] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        request = (parser_context or {}).get("request")
        meta: Mapping[str, Any] = request.META if request is not None else {}
        limit = body_limit()
        if declared_length(meta) > limit:
            raise too_large(limit)
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise too_large(limit)
        try:
            return parse_plain_json(raw, max_depth=settings.JSON_BODY_MAX_DEPTH)
        except JsonTextError as error:
            raise ParseError(str(error)) from None


class JsonContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, with every ``+json`` media type read by ``StrictJsonParser`` too
    (as the raw-body routes read them)."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        parsers = list(parsers)
        parser: BaseParser | None = super().select_parser(request, parsers)
        if parser is None and is_json_media_type(request.content_type):
            return next((p for p in parsers if isinstance(p, StrictJsonParser)), None)
        return parser
