"""Pages of every API list (issue 20): at most ``API_PAGE_SIZE`` objects per answer.

The body stays a JSON array of the page's objects, so scripts that read lists keep working
on lists that fit one page; the paging travels in headers, as GitHub's API does:
``X-Total-Count`` (objects in all) and ``Link`` with ``<url>; rel="next"``, ``"prev"``,
``"first"`` and ``"last"``. The ``hive`` client follows ``next``. ``?page=N`` picks a page
(1 = first; past the last: 404; not a whole number from 1: 400), ``?page_size=N`` its
size, up to ``API_MAX_PAGE_SIZE``.
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.paginator import InvalidPage, Page, Paginator
from django.db.models import QuerySet
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param

from core.ids import is_whole_number


def totally_ordered(queryset: QuerySet, view: Any = None) -> QuerySet:
    """The list in its order (the view's ``ordering``, else its model's ``Meta.ordering``)
    with ties broken by primary key, in the first term's direction. Pages are cut by offset,
    each in a query of its own: where rows tie (bookings that start at the same hour,
    records made in one bulk write), the database may order them differently from one
    page's query to the next (PostgreSQL's sort is not stable), and a row then comes on two
    pages and another on none. The order is named here rather than read back from the
    queryset, which Django has no public way to do: a paged list's view orders by setting
    ``ordering`` (as DRF's OrderingFilter reads it), not by ``order_by()``."""
    meta = queryset.model._meta
    ordering = list(getattr(view, "ordering", None) or meta.ordering)
    if not ordering:
        return queryset  # unordered: Django's paginator already warns
    names = {term.lstrip("-") for term in ordering if isinstance(term, str)}
    unique = {"pk", *(f.name for f in meta.concrete_fields if f.unique)}
    if not names & unique:
        first = ordering[0]
        if isinstance(first, str):
            descending = first.startswith("-")
        else:  # an expression: OrderBy knows its direction, a bare F() is ascending
            descending = getattr(first, "descending", False)
        ordering.append("-pk" if descending else "pk")
    return queryset.order_by(*ordering)


class FirstPageUncounted(Paginator):
    """Cuts the first page without counting the list first: most answers (a filtered list, a
    week of bookings) fit one page, and then the page's rows, once read, are the count
    (``LinkHeaderPagination.get_paginated_response``), which saves a query per request.

    A later page of a queryset is the list's rows whose ids its slice picks (a subquery):
    to skip rows by offset a database builds each row it skips, its joins included; asked
    for the ids alone, it can skip along an index (SQLite, the 40th page of 100 of 5,000
    bookings: 0.22 ms instead of 0.86). The list keeps its order, select_related and
    prefetch_related, so the page holds the same objects as the slice would."""

    def page(self, number: Any) -> Page:
        if str(number) == "1":
            return Page(self.object_list[: self.per_page], 1, self)
        number = self.validate_number(number)
        bottom = (number - 1) * self.per_page
        top = bottom + self.per_page
        if top + self.orphans >= self.count:  # as Paginator.page cuts it
            top = self.count
        return Page(rows_of_slice(self.object_list, bottom, top), number, self)


def rows_of_slice(rows: Any, bottom: int, top: int) -> Any:
    """``rows[bottom:top]``; for a queryset, as the rows whose ids that slice picks."""
    if not isinstance(rows, QuerySet):
        return rows[bottom:top]
    return rows.filter(pk__in=rows[bottom:top].values("pk"))


def whole_number(request: Request, name: str, what: str) -> str:
    """The query parameter ``name`` if given, refused with 400 unless a whole number from 1."""
    value: str | None = request.query_params.get(name)
    if value is None or value == "":
        return ""
    if not (is_whole_number(value) and int(value) >= 1):
        message = f"{what} is a whole number from 1."
        raise ValidationError({name: [message], "detail": f"{name}: {message}"})
    return value


class LinkHeaderPagination(PageNumberPagination):
    django_paginator_class = FirstPageUncounted
    page_size_query_param = "page_size"
    page_query_description = "Page number (1 = first); the Link header names the others."
    page_size_query_description = (
        "Objects per page (default API_PAGE_SIZE, at most API_MAX_PAGE_SIZE)."
    )

    def get_page_size(self, request: Request) -> int | None:
        # Read per request, so the settings (and tests overriding them) apply.
        self.page_size = settings.API_PAGE_SIZE
        self.max_page_size = settings.API_MAX_PAGE_SIZE
        # DRF falls back to the default size for a size it cannot read (1.5, 0, "ten"); the
        # schema says a whole number from 1, so such a size is refused as a page is.
        whole_number(request, self.page_size_query_param, "A page size")
        return super().get_page_size(request)

    def get_page_number(self, request: Request, paginator: Paginator) -> str:
        return whole_number(request, self.page_query_param, "A page") or "1"

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:  # as get_page_number and get_page_size check them
            parameter["schema"]["minimum"] = 1
        return parameters

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> list[Any]:
        # DRF's also counts every list, for the browsable API's page links; these are in the
        # Link header.
        return list(self.page_slice(queryset, request, view))

    def page_slice(self, queryset: Any, request: Request, view: Any = None) -> Any:
        """The page's objects; of a queryset, an unread queryset, for lists whose rows are
        written from values() (core.rows)."""
        self.request = request
        if isinstance(queryset, QuerySet):
            queryset = totally_ordered(queryset, view)
        size = self.get_page_size(request) or settings.API_PAGE_SIZE  # None is DRF for "no pages"
        paginator = self.django_paginator_class(queryset, size)
        number = self.get_page_number(request, paginator)
        try:
            self.page = paginator.page(number)
        except InvalidPage as exc:
            raise NotFound(
                self.invalid_page_message.format(page_number=number, message=exc)
            ) from None
        return self.page.object_list

    def get_paginated_response(self, data: Any) -> Response:
        assert self.page is not None  # set by page_slice
        paginator = self.page.paginator
        if self.page.number == 1 and len(data) < paginator.per_page:
            paginator.count = len(data)  # the whole list is on this page: no count query
        response = Response(data, headers={"X-Total-Count": str(paginator.count)})
        links = self.links()
        if links:
            response["Link"] = ", ".join(f'<{url}>; rel="{rel}"' for rel, url in links)
        return response

    def links(self) -> list[tuple[str, str]]:
        assert self.request is not None and self.page is not None  # set by page_slice
        url = self.request.build_absolute_uri()
        last = self.page.paginator.num_pages
        links = []
        if self.page.has_next():
            following = self.page.number + 1
            links.append(("next", replace_query_param(url, self.page_query_param, following)))
        if self.page.has_previous() and (previous := self.get_previous_link()):
            links.append(("prev", previous))
        if last > 1:
            links.append(("first", remove_query_param(url, self.page_query_param)))
            links.append(("last", replace_query_param(url, self.page_query_param, last)))
        return links

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return schema  # the body is the plain array; the paging is in headers


# The headers of every paged answer, for the OpenAPI schema (hiveproject.api_schema).
PAGE_HEADERS = {
    "X-Total-Count": {
        "schema": {"type": "integer"},
        "description": "How many objects the whole list has.",
    },
    "Link": {
        "schema": {"type": "string"},
        "description": 'The other pages: `<url>; rel="next"`, "prev", "first", "last".',
    },
}


def paged_rows(view: Any, queryset: QuerySet, rows: Callable[[Any], list[Any]]) -> Response:
    """One page of ``queryset`` as the answer, its objects written by ``rows(page)``."""
    paginator: LinkHeaderPagination = view.paginator
    page = paginator.page_slice(queryset, view.request, view)
    return paginator.get_paginated_response(rows(page))


def paged(request: Request, view: Any, rows: list[Any]) -> Response:
    """One page of ``rows`` as the answer, with the paging headers."""
    paginator = LinkHeaderPagination()
    page = paginator.paginate_queryset(rows, request, view=view)
    return paginator.get_paginated_response(page)
