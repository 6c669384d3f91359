"""Console lists that read no more rows than they show, whatever the size of the table.

Django's changelist counts the filtered rows for its paginator (and the whole table for its
"n total"), pages by OFFSET, and lets a column header re-sort the table: each reads every
row of the org at least once. A list of this module instead pages by keyset: the page
after is the rows whose key (``keyset``, newest first) is below the last row shown,
"Newer" the rows above the first one shown, and no total is counted.

A page is read in two steps. First the candidates: each *branch* (a queryset that one
index answers in key order: the org's rows, or one value of an indexed column) gives the
keys of its first rows after the cursor, ``LIMIT`` per page; the branches are merged by
key. Then the rows themselves, by primary key alone (the org conditions stay with the
branches: ``KeysetChangeList._by_pk`` says why), with every filter applied. A filter no
index serves (``keyset_params`` names those that are served) turns the page into a
*window*: the candidates are the next ``keyset_window`` rows of the branches, the filters
are applied to each branch over the window's span of the key (a range of the branch's own
index), and the page shows those that match; "Older" goes on below the window. Either way
a page visits at most (number of branches) x (window or page) rows, and nothing counts
them: no total, no numbered pages, no filter counts ("facets").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.admin.options import ShowFacets
from django.contrib.admin.views.main import ChangeList
from django.db import connection
from django.db.models import Model, Q, QuerySet
from django.http import HttpRequest

from apps.tenancy.admin_access import ROWS_BY_PK, member_roles
from apps.tenancy.models import Org

AFTER_VAR = "after"  # the page of rows older than this key
BEFORE_VAR = "before"  # the page of rows newer than this key
CURSOR_SEPARATOR = "~"


@dataclass
class KeysetPage:
    """What the pagination bar shows: no count, a cursor each way, and a sentence."""

    template_name = "admin/keyset_pagination.html"
    per_page: int
    older: str | None = None
    newer: str | None = None
    window: int | None = None  # rows looked through, when a filter no index serves is on
    note: str = ""
    older_url: str = ""
    newer_url: str = ""

    def get_elided_page_range(self, *args: Any, **kwargs: Any) -> list[int]:
        """Numbered pages would need a count: there are none (the admin's tag asks)."""
        return []

    # Where the rows came from, for the page's sentence ("receipts #51 to #100").
    shown: list[Any] = field(default_factory=list)


class KeysetChangeList(ChangeList):
    """A changelist that pages by keyset (module docstring); the model admin is a
    :class:`KeysetAdmin`."""

    model_admin: Any  # a KeysetAdmin mixed into a ModelAdmin

    def get_filters_params(self, params: Any = None) -> Any:
        lookup_params = super().get_filters_params(params)
        for name in (AFTER_VAR, BEFORE_VAR):
            lookup_params.pop(name, None)
        return lookup_params

    def __init__(self, request: HttpRequest, *args: Any, **kwargs: Any) -> None:
        super().__init__(request, *args, **kwargs)
        # Filter links, the search box and the sort keep the filters, never the cursor.
        for name in (AFTER_VAR, BEFORE_VAR):
            self.params.pop(name, None)
            self.filter_params.pop(name, None)
        if getattr(request, "_org_chosen_for_the_list", False):
            # The org a list opens on is not a filter the user set.
            self.has_active_filters = any(
                name != "org" for name in self.get_filters_params()
            ) or bool(self.query)

    def get_ordering(self, request: HttpRequest, queryset: QuerySet[Any]) -> list[Any]:
        return list(self.model_admin.get_keyset(request, self))

    def get_results(self, request: HttpRequest) -> None:
        admin = self.model_admin
        keyset = admin.get_keyset(request, self)
        names = [key.lstrip("-") for key in keyset]
        after = _decode(self.model, names, request.GET.get(AFTER_VAR))
        before = None if after else _decode(self.model, names, request.GET.get(BEFORE_VAR))
        newer_first = before is None
        served = admin.keyset_params | {"org"}
        windowed = any(
            name.split("__")[0] not in served for name in self.get_filters_params()
        ) or bool(self.query and admin.keyset_search_windowed(request, self.query))
        page = KeysetPage(per_page=self.list_per_page)
        limit = admin.keyset_window if windowed else self.list_per_page + 1
        branches = admin.keyset_branches(request, self.root_queryset, self)
        if windowed:
            bounds = admin.keyset_window_range(request, self, after or before, newer_first)
            if bounds is not None:
                branches = [branch.filter(bounds) for branch in branches]
        candidates = _candidates(
            branches,
            names,
            cursor=after or before,
            newer_first=newer_first,
            limit=limit,
        )
        if windowed:
            page.window = len(candidates)
            # Which of the window's rows match, then the page in the window's order.
            matching = self._matching(request, branches, candidates, names[0])
            hits = [candidate for candidate in candidates if candidate[-1] in matching]
            if len(hits) > self.list_per_page:  # a full page: go on after its last row
                hits = hits[: self.list_per_page]
                more, last_key = True, tuple(hits[-1][:-1])
            else:  # the window is looked through: go on below it, if there is more
                more = len(candidates) == limit
                last_key = tuple(candidates[-1][:-1]) if candidates else ()
            rows = self._rows(request, hits)
        else:
            more = len(candidates) > self.list_per_page
            candidates = candidates[: self.list_per_page]
            rows = self._rows(request, candidates)
            last_key = tuple(candidates[-1][:-1]) if candidates else ()
        if not newer_first:
            rows.reverse()
        admin.keyset_page_loaded(request, rows)
        if newer_first:
            page.older = _encode(last_key) if more and last_key else None
            page.newer = _encode(_key_of(rows[0], names)) if after and rows else None
            if after and not rows:
                page.newer = _encode(after)  # an empty last window: back to what was before
        else:
            page.newer = _encode(last_key) if more and last_key else None
            page.older = _encode(_key_of(rows[-1], names)) if rows else None
        page.shown = rows
        page.older_url = self._cursor_url(AFTER_VAR, page.older)
        page.newer_url = self._cursor_url(BEFORE_VAR, page.newer)
        page.note = admin.keyset_note(request, self, page)
        self.result_list = rows
        self.result_count = len(rows)
        self.full_result_count = None
        self.show_full_result_count = False
        self.show_admin_actions = True
        self.can_show_all = False
        self.multi_page = bool(page.older or page.newer)
        self.paginator = page

    def _filtered(self, request: HttpRequest, root: QuerySet[Any]) -> QuerySet[Any]:
        """The list's filters and search applied to ``root`` instead of the admin's
        queryset, in no order (an order would let a plan walk the key's index past every
        row); the org filter is left to ``root``."""
        self.root_queryset, saved = root, self.root_queryset
        setattr(request, ROWS_BY_PK, True)
        try:
            return self.get_queryset(request).order_by()
        finally:
            self.root_queryset = saved
            delattr(request, ROWS_BY_PK)

    def _matching(
        self,
        request: HttpRequest,
        branches: list[QuerySet[Any]],
        candidates: list[tuple[Any, ...]],
        first_key: str,
    ) -> set[Any]:
        """Which of the window's rows the list's filters and search keep: each branch
        read over the window's span of its first key (a range of the branch's own index,
        as long as the window, whatever the filters), in one statement."""
        if not candidates:
            return set()
        firsts = [candidate[0] for candidate in candidates]
        span = Q(**{f"{first_key}__gte": min(firsts), f"{first_key}__lte": max(firsts)})
        reads = [
            self._filtered(request, branch.filter(span)).values_list("pk", flat=True)
            for branch in branches
        ]
        if len(reads) > 1 and connection.features.supports_slicing_ordering_in_compound:
            found = set(reads[0].union(*reads[1:], all=True))
        else:
            found = {pk for read in reads for pk in read}
        # The span may hold a row of the same first key just past the window: not shown.
        return found & {candidate[-1] for candidate in candidates}

    def _by_pk(self, request: HttpRequest, pks: list[Any]) -> QuerySet[Any]:
        """The list's filters and search on the rows ``pks`` alone, read by primary key,
        in no order (an order would let a plan walk the key's index past every row).

        The org conditions (the user's orgs, the org shown) are left out: the candidates
        came from the branches, which hold them, and a plan made for any org (a generic
        plan) reckons an org's rows at the average org's few, so it would read the org's
        rows through the org's index rather than these by theirs. Row-level security
        still applies in the database."""
        unscoped = self.model_admin.keyset_unscoped_queryset(request)
        return self._filtered(request, unscoped.filter(pk__in=pks))

    def _rows(self, request: HttpRequest, candidates: list[tuple[Any, ...]]) -> list[Any]:
        """The rows of ``candidates`` (primary key last), in their order."""
        by_pk = {row.pk: row for row in self._by_pk(request, [c[-1] for c in candidates])}
        return [by_pk[pk] for *_, pk in candidates if pk in by_pk]

    def _cursor_url(self, name: str, cursor: str | None) -> str:
        if cursor is None:
            return ""
        return self.get_query_string({name: cursor}, remove=[AFTER_VAR, BEFORE_VAR])


def _key_of(row: Model, names: list[str]) -> tuple[Any, ...]:
    return tuple(getattr(row, name if name != "org" else "org_id") for name in names)


def _encode(key: tuple[Any, ...] | None) -> str | None:
    if not key:
        return None
    parts = [value.isoformat() if isinstance(value, datetime) else str(value) for value in key]
    return CURSOR_SEPARATOR.join(parts)


def _decode(model: type[Model], names: list[str], text: str | None) -> tuple[Any, ...] | None:
    """The key a cursor names, or None for a cursor that does not parse (the first page)."""
    if not text:
        return None
    parts = text.split(CURSOR_SEPARATOR)
    if len(parts) != len(names):
        return None
    try:
        return tuple(
            model._meta.get_field(name).to_python(part)  # type: ignore[union-attr]
            for name, part in zip(names, parts, strict=True)
        )
    except Exception:
        return None


def _beyond(names: list[str], cursor: tuple[Any, ...], *, older: bool) -> Q:
    """Rows whose key is below ``cursor`` (older) or above it, as conditions an index on
    the key reads as a range: the first key bounded on its own, then the tie broken."""
    less, bound = ("lt", "lte") if older else ("gt", "gte")
    first = names[0]
    if len(names) == 1:
        return Q(**{f"{first}__{less}": cursor[0]})
    tie = Q(**{first: cursor[0], f"{names[1]}__{less}": cursor[1]})
    return Q(**{f"{first}__{bound}": cursor[0]}) & (Q(**{f"{first}__{less}": cursor[0]}) | tie)


def _candidates(
    branches: list[QuerySet[Any]],
    names: list[str],
    *,
    cursor: tuple[Any, ...] | None,
    newer_first: bool,
    limit: int,
) -> list[tuple[Any, ...]]:
    """The keys (and primary key, last) of the first ``limit`` rows of the merged branches
    beyond ``cursor``: each branch read in key order, ``LIMIT`` rows, one statement."""
    if not branches:
        return []
    order = [f"-{name}" if newer_first else name for name in names]
    reads = []
    for branch in branches:
        if cursor is not None:
            branch = branch.filter(_beyond(names, cursor, older=newer_first))
        reads.append(branch.order_by(*order).values_list(*names, "pk")[:limit])
    if len(reads) == 1:
        merged: list[Any] = list(reads[0])
    elif connection.features.supports_slicing_ordering_in_compound:
        merged = list(reads[0].union(*reads[1:], all=True))
    else:  # SQLite: no LIMIT inside a UNION; one statement a branch
        merged = [row for read in reads for row in read]
    seen, rows = set(), []
    for row in sorted(merged, key=lambda row: tuple(row[:-1]), reverse=newer_first):
        if row[-1] not in seen:
            seen.add(row[-1])
            rows.append(tuple(row))
    return rows[:limit]


def visible_org_ids(request: HttpRequest) -> list[int]:
    """The orgs the signed-in user's lists may open on, first the one they open on."""
    if request.user.is_superuser:
        return list(Org.objects.order_by("slug").values_list("pk", flat=True)[:1])
    roles = member_roles(request)
    return list(
        Org.objects.filter(pk__in=list(roles)).order_by("slug").values_list("pk", flat=True)
    )


class KeysetAdmin:
    """Mixed into a model admin (before the theme's ModelAdmin): its list pages by keyset
    (module docstring). A list of an org's rows shows one org at a time: it opens on the
    signed-in user's first org (by slug), and the org filter picks another."""

    keyset: tuple[str, ...] = ("-created_at", "-id")
    # Filter parameters (their field, before any "__") the branches read by index.
    keyset_params: frozenset[str] = frozenset()
    keyset_window = 2_000
    # The stock search (``search_fields``, icontains) looks through the window; False when
    # keyset_branches read the search by index.
    keyset_search_in_window = True
    one_org_at_a_time = True
    sortable_by: Any = ()  # a header sort would sort the org's rows
    show_full_result_count = False
    show_facets = ShowFacets.NEVER  # "Show counts" would count the org's rows per filter

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return KeysetChangeList

    def keyset_page_loaded(self, request: HttpRequest, rows: list[Any]) -> None:
        """The page's rows, read: a list whose columns need related rows loads them here,
        for the whole page at once (a query or two, not a few per row)."""

    def get_keyset(self, request: HttpRequest, changelist: KeysetChangeList) -> tuple[str, ...]:
        return self.keyset

    def keyset_unscoped_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        """What a page's rows are read from by primary key: the admin's queryset without
        its filter of the user's orgs (``KeysetChangeList._by_pk``)."""
        unscoped = getattr(self, "unscoped_queryset", None) or getattr(self, "get_queryset")  # noqa: B009
        queryset: QuerySet[Any] = unscoped(request)
        return queryset

    def list_org_id(self, request: HttpRequest) -> int | None:
        """The org the list shows (the ``org`` parameter, checked by the queryset's
        membership filter), None for a list of no org."""
        if not self.one_org_at_a_time:
            return None
        value = request.GET.get("org", "")
        return int(value) if value.isdigit() else None

    def keyset_branches(
        self, request: HttpRequest, queryset: QuerySet[Any], changelist: KeysetChangeList
    ) -> list[QuerySet[Any]]:
        """The index ranges the page merges; by default the org's rows (one branch)."""
        org_id = self.list_org_id(request)
        if self.one_org_at_a_time:
            if org_id is None:
                return []
            return [queryset.filter(**{getattr(self, "org_lookup", "org_id"): org_id})]
        return [queryset]

    def keyset_search_windowed(self, request: HttpRequest, term: str) -> bool:
        """Whether the search for ``term`` looks through the window (a search no index
        serves), rather than being read as branches (``keyset_branches``)."""
        return self.keyset_search_in_window

    def keyset_window_range(
        self,
        request: HttpRequest,
        changelist: KeysetChangeList,
        cursor: tuple[Any, ...] | None,
        newer_first: bool,
    ) -> Q | None:
        """The window as a range of the key, where the key can say it (a gapless
        sequence): a range is planned as the few rows it is, where a large LIMIT may be
        planned as a scan. None: the window is the LIMIT alone."""
        return None

    def keyset_note(
        self, request: HttpRequest, changelist: KeysetChangeList, page: KeysetPage
    ) -> str:
        if page.window is not None:
            return (
                f"{len(page.shown)} matching among the next {page.window:,} "
                f"{changelist.opts.verbose_name_plural}, newest first"
            )
        return "Newest first"

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Any], search_term: str
    ) -> tuple[QuerySet[Any], bool]:
        """A search no index serves looks through the window, like a filter; a list whose
        search is indexed reads it as branches of the page (``keyset_branches``)."""
        if self.keyset_search_windowed(request, search_term):
            return super().get_search_results(request, queryset, search_term)  # type: ignore[misc,no-any-return]
        return queryset, False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> Any:
        if self.one_org_at_a_time and request.method == "GET":
            value = request.GET.get("org", "")
            if not value.isdigit():
                first = visible_org_ids(request)[:1]
                if first:
                    chosen = request.GET.copy()
                    chosen["org"] = str(first[0])
                    request.GET = chosen  # type: ignore[assignment]
                    request._org_chosen_for_the_list = True  # type: ignore[attr-defined]
        return super().changelist_view(request, extra_context)  # type: ignore[misc]
