from django.urls import path

from . import newjob, views
from .api import DeviceStateViewSet

urlpatterns = [
    path("", views.board, name="overview"),
    # Under jobs/ with the other job forms; here because it offers the queue too.
    path("jobs/new/", newjob.job_new, name="job-new"),
]
# (prefix, viewset, basename) registered on the project's /api/ router.
api_routes = [("device-states", DeviceStateViewSet, "device-state")]
