"""Pages and API routes of reservations (wired in hiveproject/urls.py)."""

from django.urls import path

from . import views
from .api import ReservationViewSet

urlpatterns = [
    path("calendar/", views.calendar_page, name="reservations-calendar"),
    path("overview/", views.overview_page, name="reservations-overview"),
    path("mine/", views.mine_page, name="reservations-mine"),
    path("usage/", views.usage_summary, name="reservations-usage"),
    path("feed/renew/", views.renew_feed, name="reservations-feed-renew"),
    path("feed/<str:token>.ics", views.ical_feed, name="reservations-ical"),
]
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = [("reservations", ReservationViewSet)]
