"""The one place that answers "which objects may this user see or act on".

``restrict(queryset, user, action)`` is used by pages, the admin and the API alike, so they
cannot disagree. An object is allowed when any of these holds:

- the user is an active superuser;
- the user holds the model permission (``app.<action>_<model>``) globally, or on that object
  through django-guardian (to the user or to one of their groups): a host admin is a user
  with ``monitoring.change_host`` on a host;
- a rule registered for (model, action) says so, e.g. "everyone signed in may view hosts",
  "a user may view the grants that apply to them". Other apps register their own rules
  (e.g. a reservation's owner may change it) with ``@rule(Model, "change")``.
"""

from collections.abc import Callable

from django.contrib.auth.models import Group
from django.db.models import Model, Q, QuerySet
from guardian.shortcuts import get_objects_for_user

from monitoring.models import Device, Host

from .models import Ban, Grant, HostAccount, Message, Profile

ACTIONS = ("view", "add", "change", "delete")
_rules: dict[tuple[type[Model], str], Callable[[object], Q]] = {}


def rule(model: type[Model], action: str):
    """Register ``fn(user) -> Q`` as one more reason to allow ``action`` on ``model``."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; use one of {ACTIONS}")

    def register(fn):
        _rules[(model, action)] = fn
        return fn

    return register


def permission_name(model: type[Model], action: str) -> str:
    return f"{model._meta.app_label}.{action}_{model._meta.model_name}"


def is_signed_in(user) -> bool:
    return bool(user and user.is_authenticated and user.is_active)


def restrict(queryset: QuerySet, user, action: str) -> QuerySet:
    """The part of ``queryset`` that ``user`` may ``action`` ("view", "change", "delete")."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}; use one of {ACTIONS}")
    if not is_signed_in(user):
        return queryset.none()
    perm = permission_name(queryset.model, action)
    if user.is_superuser or user.has_perm(perm):
        return queryset
    allowed = Q(pk__in=get_objects_for_user(user, perm, queryset.model).values("pk"))
    extra = _rules.get((queryset.model, action))
    if extra is not None:
        allowed |= extra(user)
    return queryset.filter(allowed).distinct()


def can(user, action: str, obj: Model) -> bool:
    """Whether ``user`` may ``action`` this one object."""
    return restrict(type(obj)._default_manager.filter(pk=obj.pk), user, action).exists()


def managed_hosts(user) -> QuerySet:
    """Hosts the user administers (all of them for superusers)."""
    return restrict(Host.objects.all(), user, "change")


def may_inspect_others(user) -> bool:
    """Operators (global grant viewers) and host admins may look at other users' access."""
    if not is_signed_in(user):
        return False
    return user.has_perm(permission_name(Grant, "view")) or managed_hosts(user).exists()


# --- the same answer for the admin and the API ----------------------------------------------


class RestrictedAdminMixin:
    """ModelAdmin mixin: lists, views and edits only what ``restrict`` allows.

    Adding and deleting keep Django's model permissions; viewing and changing also follow
    object permissions and rules, so a host admin sees and edits their hosts only.
    """

    def get_queryset(self, request):
        return restrict(super().get_queryset(request), request.user, "view")

    def _allowed(self, request, action, obj):
        if obj is not None:
            return can(request.user, action, obj)
        if request.user.has_perm(permission_name(self.model, action)):
            return True  # may act on the whole model, even while it is empty
        return restrict(self.model._default_manager.all(), request.user, action).exists()

    def has_view_permission(self, request, obj=None):
        return self._allowed(request, "view", obj) or self.has_change_permission(request, obj)

    def has_change_permission(self, request, obj=None):
        return self._allowed(request, "change", obj)

    def has_module_permission(self, request):
        return request.user.is_staff and self.has_view_permission(request)


class RestrictedViewSetMixin:
    """DRF viewset mixin: the queryset is what the user may view (others answer 404)."""

    def get_queryset(self):
        return restrict(super().get_queryset(), self.request.user, "view")


# --- rules ------------------------------------------------------------------------------------

# Not Q(): an empty Q vanishes when OR-ed with another, so "everything" is spelled out.
EVERYTHING = Q(pk__isnull=False)
rule(Host, "view")(lambda user: EVERYTHING)  # the lab is visible to all who sign in
rule(Device, "view")(lambda user: EVERYTHING)
rule(Message, "view")(lambda user: EVERYTHING)


@rule(Device, "change")
def devices_of_managed_hosts(user) -> Q:
    return Q(host__in=managed_hosts(user).values("pk"))


@rule(Grant, "view")
def grants_that_apply(user) -> Q:
    """Own grants (directly or through a group), and for host admins those on their hosts."""
    applies = Q(users=user) | Q(groups__in=Group.objects.filter(user=user).values("pk"))
    managed = managed_hosts(user)
    if managed.exists():
        hosts = managed.values("pk")
        applies |= Q(scope=Grant.Scope.ALL) | Q(hosts__in=hosts) | Q(devices__host__in=hosts)
    return applies


@rule(Ban, "view")
def own_bans(user) -> Q:
    return Q(user=user)


@rule(Profile, "view")
def own_profile(user) -> Q:
    return Q(user=user)


@rule(HostAccount, "view")
def own_host_accounts(user) -> Q:
    return Q(profile__user=user)
