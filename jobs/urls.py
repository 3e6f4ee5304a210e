"""Pages and API routes of jobs (wired in hiveproject/urls.py)."""

urlpatterns = []
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = []
