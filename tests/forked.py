"""Processes forked from one forkserver that imported the package and the children's
modules once: a child costs a fork, not a new interpreter importing everything (0.3-0.5 s
of CPU each). For tests whose point is several processes (races) or killing one (crashes).
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import ForkServerContext

__all__ = ["GUARD", "context"]

GUARD = 60.0  # seconds: a child that never arrives or never ends is a hang, not slowness

#: Every module whose functions run in a forked child: one forkserver, started by the
#: first test that needs it, serves them all (a module missing here is imported anew by
#: each child).
PRELOAD = ["tests.integration.sync.racing_children", "tests.integration.reliability.sync_child"]


def context() -> ForkServerContext:
    """The forkserver context, its server importing `PRELOAD` (and so the package) once."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx
