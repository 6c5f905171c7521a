"""procrastinate's job manager, noting at once the side-task failure that stops a worker
(for `/healthz` and the worker's exit)."""

from __future__ import annotations

from typing import Any

from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.manager import JobManager

from invoicing_async._postgres.reasons import describe

__all__ = ["WatchedJobManager"]


class WatchedJobManager(JobManager):
    """A `JobManager` whose `failure` names the first failure of the worker's loops."""

    failure: str | None = None

    def _failed(self, what: str, exc: Exception) -> None:
        if self.failure is None:  # procrastinate's "Database error." wraps psycopg's
            self.failure = f"{what}: {describe(exc.__cause__ or exc)}"

    async def fetch_job(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().fetch_job(*args, **kwargs)
        except Exception as exc:
            self._failed("fetching jobs failed", exc)
            raise

    async def listen_for_jobs(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().listen_for_jobs(*args, **kwargs)
        except Exception as exc:
            self._failed("the job listener failed", exc)
            raise

    async def defer_periodic_job(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().defer_periodic_job(*args, **kwargs)
        except AlreadyEnqueued:  # the dispatcher's job already waits: not a failure
            raise
        except Exception as exc:
            self._failed("deferring the dispatcher failed", exc)
            raise

    async def update_heartbeat(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().update_heartbeat(*args, **kwargs)
        except Exception as exc:
            self._failed("the worker heartbeat failed", exc)
            raise
