"""Who is acting: the signed-in user of the current request, for receivers of model signals.

Model signals do not carry the request, so the middleware keeps its user in a context
variable while the view runs. Outside a request (tasks, commands) the actor is the system.
"""

from contextvars import ContextVar

# The request, not request.user: asgiref inspects context values when it hands them between
# threads, and touching the lazy user there would query the database from the event loop.
_request: ContextVar = ContextVar("audit_request", default=None)


def current_actor():
    """The signed-in user making the current request, or None (the system)."""
    user = getattr(_request.get(), "user", None)
    return user if getattr(user, "is_authenticated", False) else None


class ActorMiddleware:
    """Sync-only on purpose: the view then runs in this call's context and sees the user."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)
