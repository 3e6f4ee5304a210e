"""The web process is killed (SIGKILL) while a task runs: nothing of the task lived in it.

A new web process, on the same database, shows the task running with its log, and then its
exit code once the workers' sync has seen it end. The task itself (GNU screen over the real
sshd) never notices the web process dying.
"""

import json
import shutil
import sys

import pytest

from jobs import services
from jobs.models import Task
from jobs.tasks import sync_running
from tests.faults.test_database_lost import get
from tests.jobs.conftest import (  # noqa: F401 (fixtures)
    _fresh_job_connections,
    log_dir,
    node,
    runner,
    wait_for,
)
from tests.jobs.test_execution import make_task
from tests.monitoring.conftest import fake_gpu_root, sshd  # noqa: F401 (fixtures)
from tests.security.conftest import Daphne, service_env

# Says it runs, then waits for the release file and exits 7.
WAITS_FOR_RELEASE = (
    f"{sys.executable} -u -c 'import os, sys, time\n"
    'print("running before the restart")\n'
    "while not os.path.exists(sys.argv[1]): time.sleep(0.1)\n"
    "sys.exit(7)' {release}"
)

pytestmark = pytest.mark.django_db(transaction=True)


def answer(server, path, session) -> dict:
    status, body = get(server, path, session)
    assert status == 200, body
    return json.loads(body)


def test_a_killed_web_process_loses_no_task(runner, node, settings, client, tmp_path):  # noqa: F811
    release = tmp_path / "release"
    task = services.spawn_task(make_task(runner, node, WAITS_FOR_RELEASE, release=release), runner)
    client.force_login(runner)
    session = {"Cookie": f"sessionid={client.cookies['sessionid'].value}"}
    # The service key, secret (session) and job settings of this test; a data dir of its
    # own, since other tests leave a hive.env in theirs.
    data_dir = tmp_path / "web-data"
    shutil.copytree(settings.SSH_KEY_PATH.parent, data_dir / "ssh")
    env = service_env(
        data_dir,
        SECRET_KEY=settings.SECRET_KEY,
        JOBS_LOG_DIR=settings.JOBS_LOG_DIR,
        JOBS_SESSION_PREFIX=settings.JOBS_SESSION_PREFIX,
    )
    web = Daphne(env, collect_static=False)
    try:
        assert answer(web, f"/api/tasks/{task.pk}/", session)["status"] == "running"
    finally:
        web.proc.kill()  # no clean shutdown: as if the machine's OOM killer took it
        web.proc.wait()

    web = Daphne(env, collect_static=False)
    try:
        assert answer(web, f"/api/tasks/{task.pk}/", session)["status"] == "running"

        def log_shown():
            sync_running()  # the workers' part: sync, then fetch the logs
            return answer(web, f"/api/tasks/{task.pk}/log/", session)["text"]

        assert "running before the restart" in wait_for(log_shown)
        release.touch()
        assert wait_for(lambda: services.sync_tasks([Task.objects.get(pk=task.pk)]) == 1)
        shown = answer(web, f"/api/tasks/{task.pk}/", session)
        assert (shown["status"], shown["exit_code"]) == ("exited", 7)
    finally:
        web.stop()
