"""Log downloads are streamed piece by piece (issue 20), under WSGI and ASGI alike: a large
log never sits in memory whole, and the file holds exactly what the log held."""

import getpass

import pytest
from asgiref.sync import async_to_sync
from django.test import AsyncClient

import jobs.api
from jobs import services
from jobs.models import Task
from jobs.services import TaskSpec

LOG = "".join(f"line {n}: {'x' * 50}\n" for n in range(200))  # 11 KB, many pieces


@pytest.fixture
def logged_task(runner, node, log_dir, monkeypatch):
    monkeypatch.setattr(jobs.api, "LOG_DOWNLOAD_PIECE", 1000)
    job = services.create_job(runner, name="logs", specs=[TaskSpec(host=node, template="true")])
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / "big.log"
    path.write_text(LOG)
    task = job.tasks.get()
    Task.objects.filter(pk=task.pk).update(
        log_path=str(path), status=Task.Status.EXITED, unix_username=getpass.getuser()
    )
    return task


@pytest.fixture
def reads(monkeypatch):
    calls = []
    original = services.read_log

    def counted(task, offset=0, limit=None):
        calls.append(offset)
        return original(task, offset, limit)

    monkeypatch.setattr(services, "read_log", counted)
    return calls


def test_a_download_is_streamed_in_pieces(client, runner, logged_task, reads):
    client.force_login(runner)
    response = client.get(f"/api/tasks/{logged_task.pk}/download/")
    assert response.status_code == 200 and response.streaming, response.content
    assert b"".join(response.streaming_content).decode() == LOG
    assert reads == list(range(0, len(LOG), 1000))
    assert response["Content-Disposition"].startswith("attachment;")


def test_under_asgi_each_piece_is_read_as_it_is_sent(client, runner, logged_task, reads):
    client.force_login(runner)

    async def download():
        asgi = AsyncClient()
        asgi.cookies = client.cookies
        response = await asgi.get(f"/jobs/tasks/{logged_task.pk}/log.txt")
        chunks = []
        async for chunk in response.streaming_content:
            chunks.append((len(reads), chunk))
        return response, chunks

    response, chunks = async_to_sync(download)()
    assert response.status_code == 200
    assert b"".join(chunk for _, chunk in chunks).decode() == LOG
    # Each piece was read only when the one before it had been sent.
    assert [seen for seen, _ in chunks] == list(range(1, len(chunks) + 1))
