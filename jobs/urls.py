"""Pages and API routes of jobs (wired in hiveproject/urls.py)."""

from django.urls import path
from django.views.generic import RedirectView

from . import views
from .api import JobViewSet, TaskViewSet

urlpatterns = [
    path("", views.job_list, name="job-list"),
    path("action", views.jobs_action, name="jobs-action"),
    # "new/" (the guided form, which also queues) is board.newjob's: see board/urls.py.
    path("new/rows/", views.job_rows, name="job-rows"),
    # The sweep form became the guided form's step 3; old links and bookmarks land there.
    path("new/grid/", RedirectView.as_view(pattern_name="job-new"), name="job-grid"),
    path("new/distributed/", views.job_distributed, name="job-distributed"),
    path("<int:pk>/", views.job_detail, name="job-detail"),
    path("<int:pk>/action", views.job_action, name="job-action"),
    path("<int:pk>/duplicate", views.job_duplicate, name="job-duplicate"),
    path("tasks/<int:pk>/log/", views.task_log, name="task-log"),
    path("tasks/<int:pk>/log.txt", views.task_log_download, name="task-log-download"),
]
# (prefix, viewset) pairs registered on the project's /api/ router.
api_routes = [("jobs", JobViewSet), ("tasks", TaskViewSet)]
