"""Pages and API routes of reservations (wired in hiveproject/urls.py)."""

from .api import ReservationViewSet

urlpatterns = []
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = [("reservations", ReservationViewSet)]
