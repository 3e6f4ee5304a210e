"""Long API lists written from ``QuerySet.values()`` by their serializer's own fields.

A ModelSerializer writing a page of model instances spends most of its time per row and
per field: a model instance, a related manager, and a lookup of the current time zone for
every time. A page of 1,000 bookings took about 200 ms in-process that way, about 55 ms with
the serializer over values() dicts, and about 15 ms as written here. The serializer stays
the one definition of what a list holds; ``ValuesRows`` reads from it, once, which column
(or related ids) each field writes, and then writes each value as that field would:

- plain model fields: the column of the field's ``source``;
- ``SlugRelatedField``: the related object's column (``owner__username``);
- ``PrimaryKeyRelatedField`` with ``many=True``: the related objects' ids, in their model's
  own order, from one more query for the whole page;
- ``DateTimeField``: DRF's field itself, made once per page with the request's time zone
  (its ``default_timezone`` argument), rather than asking for the zone at every value. The
  model's own times are read as ISO text in UTC (SQLite: the text it keeps, ``Cast``;
  PostgreSQL: ``to_char``) and each distinct time is parsed once: Django's readers would
  make every value of the page aware one by one, a third of a page's time;
- fields whose ``to_representation`` gives back a value of the column's own type unchanged
  (``CharField``, ``IntegerField``, ``ChoiceField``, a slug): the value as read;
- any other field: its ``to_representation``.

A field that cannot be read from columns (a ``SerializerMethodField``) is refused when the
writer is made, so a serializer changed that way fails at import, not in an answer.
"""

from collections.abc import Callable
from datetime import UTC, tzinfo
from operator import itemgetter
from typing import Any

from django.db import connections
from django.db.models import (
    CharField,
    DateTimeField,
    F,
    Func,
    ManyToManyField,
    Model,
    QuerySet,
    Value,
)
from django.db.models.functions import Cast
from django.utils import dateparse, timezone
from rest_framework import serializers
from rest_framework.settings import api_settings

# Fields whose to_representation returns the database's value for their column unchanged.
AS_READ = (serializers.CharField, serializers.IntegerField, serializers.ChoiceField)


class ValuesRows:
    """Writes the rows of a queryset of ``serializer_class``'s model as that serializer
    writes its instances (``serializer_class(queryset, many=True).data``)."""

    def __init__(self, serializer_class: type[serializers.ModelSerializer]):
        self.model: type[Model] = serializer_class.Meta.model
        self.columns: dict[str, str] = {}  # field name -> values() key
        # field name -> (the related model, the name by which its rows filter by this model)
        self.related: dict[str, tuple[type[Model], str]] = {}
        self.times: set[str] = set()  # values() keys of the model's own DateTimeFields
        self.pk = self.model._meta.pk.attname
        self.fields = {
            name: field for name, field in serializer_class().fields.items() if not field.write_only
        }
        for name, field in self.fields.items():
            self._read(name, field)

    def _read(self, name: str, field: serializers.Field) -> None:
        if field.source == "*":
            raise TypeError(f"{name}: {type(field).__name__} is not read from values()")
        source = (field.source or name).replace(".", "__")  # None: the name, as DRF binds it
        if isinstance(field, serializers.ManyRelatedField):
            if not isinstance(field.child_relation, serializers.PrimaryKeyRelatedField):
                raise TypeError(f"{name}: only lists of ids are read from values()")
            self.related[name] = self._relation(name, source)
        elif isinstance(field, serializers.SlugRelatedField):
            self.columns[name] = f"{source}__{field.slug_field}"
        elif isinstance(field, serializers.RelatedField | serializers.SerializerMethodField):
            raise TypeError(f"{name}: {type(field).__name__} is not read from values()")
        else:
            self.columns[name] = source
            if "__" not in source and isinstance(self.model._meta.get_field(source), DateTimeField):
                self.times.add(source)

    def __call__(self, queryset: QuerySet) -> list[dict[str, Any]]:
        keys = list(dict.fromkeys([self.pk, *self.columns.values()]))
        as_text = _TIME_AS_TEXT.get(connections[queryset.db].vendor)
        read = [as_text(key) if as_text and key in self.times else key for key in keys]
        rows = list(queryset.prefetch_related(None).values_list(*read))
        if not rows:
            return []
        writers = self._writers({keys.index(key) for key in self.times if as_text}, keys)
        # Each answer is picked, in the serializer's field order, from its row extended by
        # the values written for it and its related ids: one C call per row, not one per field.
        written = [(keys.index(self.columns[name]), writers[name]) for name in writers]
        related = [self._related_ids(relation, queryset) for relation in self.related.values()]
        extended = {name: len(keys) + i for i, name in enumerate([*writers, *self.related])}
        positions = [
            extended[name] if name in extended else keys.index(self.columns[name])
            for name in self.fields
        ]
        pick = itemgetter(*positions) if len(positions) > 1 else lambda row: (row[positions[0]],)
        answer = []
        for row in rows:
            extra = [None if row[at] is None else write(row[at]) for at, write in written]
            extra += [ids.get(row[0]) or [] for ids in related]
            answer.append(dict(zip(self.fields, pick(row + tuple(extra)), strict=True)))
        return answer

    def _writers(self, texts: set[int], keys: list[str]) -> dict[str, Callable[[Any], Any]]:
        """The fields whose values are written (the others are answered as read), each with
        what writes them; ``texts``: the positions in ``keys`` of times read as text. Within
        one answer a value is written once: a page of bookings holds the same few hours many
        times."""
        zone = timezone.get_current_timezone()
        writers: dict[str, Callable[[Any], Any]] = {}
        for name, field in self.fields.items():
            if name in self.related:
                continue
            if type(field) is serializers.DateTimeField:
                write: Callable[[Any], Any] = _time_field(field, zone).to_representation
                if keys.index(self.columns[name]) in texts:
                    write = _from_text(write)
                writers[name] = _once_each(write)
            elif not _as_read(field):
                writers[name] = _once_each(field.to_representation)
        return writers

    def _relation(self, name: str, source: str) -> tuple[type[Model], str]:
        """The related model of the model's many-to-many field ``source``, and the name by
        which its rows filter by this model."""
        relation = self.model._meta.get_field(source)
        related = relation.related_model
        if not (isinstance(relation, ManyToManyField) and isinstance(related, type)):
            raise TypeError(f"{name}: only the model's own many-to-many fields are read")
        return related, relation.related_query_name()

    def _related_ids(
        self, relation: tuple[type[Model], str], queryset: QuerySet
    ) -> dict[Any, list[Any]]:
        """{row's key: [related ids in their model's order]} for a many-to-many field. The
        rows are named by the page's own query as a subquery: with their ids as a list,
        binding 1,000 parameters cost ten times the query (SQLite, a page of 1,000)."""
        model, back = relation
        related = model._default_manager.filter(**{f"{back}__in": queryset.values("pk")})
        ids: dict[Any, list[Any]] = {}
        for owner, pk in related.values_list(back, "pk"):
            ids.setdefault(owner, []).append(pk)
        return ids


def _as_read(field: serializers.Field) -> bool:
    """Whether the field answers a column's value as read (a slug, text, a number)."""
    if isinstance(field, serializers.SlugRelatedField) or type(field) in AS_READ:
        return True
    # A big integer (a BigAutoField's id) is a number unless DRF is set to write it as text.
    coerce = getattr(field, "coerce_to_string", api_settings.COERCE_BIGINT_TO_STRING)
    return type(field) is serializers.BigIntegerField and not coerce


def _once_each(write: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``write``, called once for each distinct value (the same value, the same text)."""
    written: dict[Any, Any] = {}

    def write_once(value: Any) -> Any:
        try:
            text = written.get(value, written)  # the dict itself: not written yet
        except TypeError:  # not hashable (a list, a dict): written each time
            return write(value)
        if text is written:
            text = written[value] = write(value)
        return text

    return write_once


# A time column read as ISO text in UTC, by database: SQLite keeps times as the text Django
# wrote (UTC, no offset); PostgreSQL writes them with to_char in the connection's zone, which
# Django sets to UTC (USE_TZ). Django's readers would otherwise make every time of a page
# aware one by one (on PostgreSQL through its own Python loader, in place of psycopg's C one).
ISO_UTC = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'
_TIME_AS_TEXT: dict[str, Callable[[str], Func]] = {
    "sqlite": lambda column: Cast(column, CharField()),
    "postgresql": lambda column: Func(
        F(column), Value(ISO_UTC), function="to_char", output_field=CharField()
    ),
}


def _from_text(write: Callable[[Any], Any]) -> Callable[[str], Any]:
    """``write`` for a time read as text (``_TIME_AS_TEXT``): UTC, with "Z" or no offset."""

    def write_text(text: str) -> Any:
        moment = dateparse.parse_datetime(text)
        if moment is None:
            raise ValueError(f"not a time as the database writes one: {text!r}")
        return write(moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC))

    return write_text


def _time_field(field: serializers.DateTimeField, zone: tzinfo) -> serializers.DateTimeField:
    """The field as it writes in this zone: a DateTimeField with the same format, given the
    zone (DRF's default_timezone) unless it has one of its own."""
    if hasattr(field, "timezone"):
        return field
    options: dict[str, Any] = {"default_timezone": zone}
    if hasattr(field, "format"):
        options["format"] = field.format
    return serializers.DateTimeField(**options)
