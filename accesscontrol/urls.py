"""Pages and API routes of access control (wired in hiveproject/urls.py)."""

urlpatterns = []
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = []
