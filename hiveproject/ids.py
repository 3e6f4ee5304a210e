"""Limits of database ids, shared by every app that takes ids from users."""

from rest_framework import serializers

# The largest primary key the databases store (64-bit signed); a query with a larger one
# overflows in the driver (a 500), so input beyond it is refused or ignored first.
MAX_ID = 2**63 - 1


class IdField(serializers.PrimaryKeyRelatedField):
    """An object named by its id in the API: a whole number from 1 to MAX_ID, nothing else.

    Without the integer check Django's lookup reads the JSON number 1.5 as 1 and the
    request would act on object 1.
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("pk_field", serializers.IntegerField(min_value=1, max_value=MAX_ID))
        super().__init__(**kwargs)
