from django.urls import path

from . import newjob, views

urlpatterns = [
    path("", views.board, name="overview"),
    path("board/states.json", views.states, name="board-states"),
    # Under jobs/ with the other job forms; here because it offers the queue too.
    path("jobs/new/", newjob.job_new, name="job-new"),
]
