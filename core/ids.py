"""Limits of database ids, shared by every app that takes ids from users."""

from collections import Counter
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from rest_framework import relations, serializers

# The largest primary key the databases store (64-bit signed); a query with a larger one
# overflows in the driver (a 500), so input beyond it is refused or ignored first.
MAX_ID = 2**63 - 1


def is_whole_number(text: str) -> bool:
    """Only ASCII digits: str.isdigit() alone also accepts "²", which int() refuses."""
    return text.isascii() and text.isdigit()


class IdField(serializers.PrimaryKeyRelatedField):
    """An object named by its id in the API: a whole number from 1 to MAX_ID, nothing else.

    Without the integer check Django's lookup reads the JSON number 1.5 as 1 and the
    request would act on object 1.
    """

    # Narrower than DRF's: every IdField has both (__init__ requires the objects it may name).
    pk_field: serializers.IntegerField
    queryset: QuerySet[Any]

    def __init__(self, *, queryset: QuerySet[Any], **kwargs: Any) -> None:
        id_field = serializers.IntegerField(min_value=1, max_value=MAX_ID)
        super().__init__(queryset=queryset, pk_field=id_field, **kwargs)

    def get_queryset(self) -> QuerySet[Any]:
        return self.queryset.all()

    @classmethod
    def many_init(cls, *args: Any, **kwargs: Any) -> "IdList":
        options = {k: v for k, v in kwargs.items() if k in relations.MANY_RELATION_KWARGS}
        return IdList(child_relation=cls(*args, **kwargs), **options)


class IdList(serializers.ManyRelatedField):
    """Many objects named by id (``IdField(many=True)``): at most ``API_MAX_IDS`` of them,
    each named once, found in one query.

    DRF's own list looks each id up on its own, so 5,000 copies of one GPU id cost 5,000
    queries and then broke a unique constraint (a 500 on PostgreSQL); here a repeat is
    refused by name before any query.
    """

    child_relation: IdField

    def to_internal_value(self, data: Any) -> list[Any]:
        if isinstance(data, str | dict) or not hasattr(data, "__iter__"):
            self.fail("not_a_list", input_type=type(data).__name__)
        ids = [self.child_relation.pk_field.run_validation(item) for item in data]
        if not ids and not self.allow_empty:
            self.fail("empty")
        check_ids(ids)
        found = self.child_relation.get_queryset().in_bulk(ids)
        for pk in ids:
            if pk not in found:
                self.child_relation.fail("does_not_exist", pk_value=pk)
        return [found[pk] for pk in ids]


def check_ids(ids: list[int]) -> None:
    """Refuse a list of ids longer than ``API_MAX_IDS`` or naming one object twice."""
    limit = settings.API_MAX_IDS
    if len(ids) > limit:
        raise serializers.ValidationError(f"At most {limit} ids in one list ({len(ids)} given).")
    repeated = sorted(pk for pk, count in Counter(ids).items() if count > 1)
    if repeated:
        listed = ", ".join(map(str, repeated))
        raise serializers.ValidationError(f"Each id may be listed once; repeated: {listed}.")


def id_list(**kwargs: Any) -> serializers.ListField:
    """Plain ids (not looked up here), bounded like IdList: whole numbers from 1 to MAX_ID."""
    child = serializers.IntegerField(min_value=1, max_value=MAX_ID)
    return serializers.ListField(child=child, validators=[check_ids], **kwargs)
