"""SQLite connections kept open between requests (core/sqlite3): reused when safe,
never carrying uncommitted work, a replaced database file or a parent's connection into a
forked child."""

import multiprocessing
import sqlite3

import pytest
from django.contrib.auth.models import Group
from django.db import connection

from core.sqlite3.base import DatabaseWrapper

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the SQLite backend's pool"),
]


@pytest.fixture
def own_database(tmp_path):
    """A wrapper of our backend on a file of its own, like the site's settings otherwise."""
    path = tmp_path / "own.sqlite3"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.close()
    wrapper = DatabaseWrapper({**connection.settings_dict, "NAME": str(path)}, alias="own")
    yield wrapper, path
    wrapper.close()


def test_the_next_request_gets_the_connection_the_last_one_closed():
    connection.ensure_connection()
    first = connection.connection
    connection.close()
    connection.ensure_connection()
    assert connection.connection is first


def test_uncommitted_work_is_rolled_back_not_handed_on():
    connection.ensure_connection()
    connection.connection.execute("BEGIN")
    connection.connection.execute("INSERT INTO auth_group (name) VALUES ('ghost')")
    connection.close()
    assert not Group.objects.filter(name="ghost").exists()
    Group.objects.create(name="real")  # the write lock was released with the rollback
    assert Group.objects.filter(name="real").exists()


def test_a_replaced_database_file_gets_a_connection_of_its_own(own_database):
    wrapper, path = own_database
    wrapper.ensure_connection()
    old = wrapper.connection
    wrapper.close()
    path.unlink()
    sqlite3.connect(path).execute("CREATE TABLE replaced (y)").connection.close()
    wrapper.ensure_connection()
    assert wrapper.connection is not old
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master")
        assert cursor.fetchall() == [("replaced",)]


def _child_connects_anew(wrapper, parents, answer):
    wrapper.ensure_connection()
    answer.put(wrapper.connection is not parents)
    wrapper.connection = None  # the child's own: left to the process's end


def test_a_forked_child_never_uses_its_parents_connection(own_database):
    wrapper, _ = own_database
    wrapper.ensure_connection()
    parents = wrapper.connection
    wrapper.close()  # now idle in the pool, and copied into the child by the fork
    fork = multiprocessing.get_context("fork")
    answer = fork.Queue()
    child = fork.Process(target=_child_connects_anew, args=(wrapper, parents, answer))
    child.start()
    assert answer.get(timeout=30) is True
    child.join(30)
    wrapper.ensure_connection()
    assert wrapper.connection is parents  # the parent's pool still serves it
