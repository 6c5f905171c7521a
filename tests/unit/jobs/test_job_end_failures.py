"""When procrastinate cannot record a job's end (the database went away as the run ended),
the worker names that failure and exits on it, and the job's task ends quietly: before,
its exception was never retrieved and asyncio logged "Task exception was never retrieved"
(the flaky line of tests/acceptance/jobs/test_worker_outage.py)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

procrastinate = pytest.importorskip("procrastinate")

from procrastinate.manager import JobManager  # noqa: E402
from procrastinate.testing import InMemoryConnector  # noqa: E402

from invoicing_async._jobs.tasks import WatchedJobManager, _retrieve_exception  # noqa: E402


@pytest.mark.parametrize("method", ["finish_job", "retry_job"])
async def test_a_failed_record_of_a_jobs_end_is_the_managers_failure(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def gone(self: JobManager, *args: Any, **kwargs: Any) -> None:
        raise ConnectionError("server closed the connection unexpectedly")

    monkeypatch.setattr(JobManager, method, gone)
    manager = WatchedJobManager(InMemoryConnector())
    with pytest.raises(ConnectionError):
        await getattr(manager, method)(object())
    assert manager.failure is not None
    assert manager.failure.startswith("recording a job's")
    assert "server closed the connection" in manager.failure


async def test_a_jobs_task_that_ends_in_error_is_not_reported_as_never_retrieved() -> None:
    reported: list[str] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context["message"]))
    try:

        async def job(watched: bool) -> None:
            task = asyncio.current_task()
            if watched and task is not None:
                task.add_done_callback(_retrieve_exception)
            raise ConnectionError("recording the job's end failed")

        for watched in (False, True):
            task = asyncio.ensure_future(job(watched))
            await asyncio.wait([task])
            del task
            gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert reported == ["Task exception was never retrieved"]  # the unwatched one only
