from django.urls import path

from . import views

urlpatterns = [
    path("", views.board, name="overview"),
    path("board/states.json", views.states, name="board-states"),
]
