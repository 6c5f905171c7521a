"""procrastinate's job manager, noting at once the side-task failure that stops a worker
(for `/healthz` and the worker's exit)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.manager import JobManager

from invoicing_async._postgres.reasons import describe

__all__ = ["WatchedJobManager"]

T = TypeVar("T")


class WatchedJobManager(JobManager):
    """A `JobManager` whose `failure` names the first failure of the worker's loops."""

    failure: str | None = None

    async def _watched(self, what: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except AlreadyEnqueued:  # the dispatcher's job already waits: not a failure
            raise
        except Exception as exc:
            if self.failure is None:  # procrastinate's "Database error." wraps psycopg's
                self.failure = f"{what}: {describe(exc.__cause__ or exc)}"
            raise

    async def fetch_job(self, *args: Any, **kwargs: Any) -> Any:
        return await self._watched("fetching jobs failed", super().fetch_job(*args, **kwargs))

    async def listen_for_jobs(self, *args: Any, **kwargs: Any) -> None:
        call = super().listen_for_jobs(*args, **kwargs)
        await self._watched("the job listener failed", call)

    async def defer_periodic_job(self, *args: Any, **kwargs: Any) -> Any:
        call = super().defer_periodic_job(*args, **kwargs)
        return await self._watched("deferring the dispatcher failed", call)

    async def update_heartbeat(self, *args: Any, **kwargs: Any) -> None:
        call = super().update_heartbeat(*args, **kwargs)
        await self._watched("the worker heartbeat failed", call)
