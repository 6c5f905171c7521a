"""Processes forked from one forkserver that imported the package and the children's
modules once: a child costs a fork, not a new interpreter importing everything (0.3-0.5 s
of CPU each). For tests whose point is several processes (races) or killing one (crashes).
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.forkserver
from multiprocessing.context import ForkServerContext

__all__ = ["GUARD", "context"]

GUARD = 60.0  # seconds: a child that never arrives or never ends is a hang, not slowness

#: Every module whose functions run in a forked child: one forkserver, started by the
#: first test that needs it, serves them all (a module missing here is imported anew by
#: each child).
PRELOAD = [
    "tests.integration.sync.racing_children",
    "tests.integration.reliability.sync_child",
    "tests.integration.writes.writer_child",
    "tests.integration.contrib.dlt_child",  # dlt, DuckDB and Arrow: 2.4 s of CPU each
]


def context() -> ForkServerContext:
    """The forkserver context, its server importing `PRELOAD` (and so the package) once."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    if not _stop_at_exit:
        atexit.register(_stop)
        _stop_at_exit.append(True)
    return ctx


_stop_at_exit: list[bool] = []


def _stop() -> None:
    """Stop the forkserver and reap it before the test process ends: left to exit on its
    own it is not our child any more, and the CPU of every forked child (reaped by it)
    would be missing from the suite's own count (`time`, `getrusage`)."""
    server = multiprocessing.forkserver._forkserver  # noqa: SLF001
    server._stop()  # type: ignore[attr-defined]  # noqa: SLF001  # as the stdlib tests do
