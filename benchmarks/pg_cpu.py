"""PostgreSQL's CPU as seen from outside: the postmaster, its live children and the ones that
exited, each child by kind (issue #48).

`PostgresCpu(postmaster).total()` is what an outside measurement counts: the postmaster's
own seconds and its reaped children's (``cutime + cstime`` in ``/proc/PID/stat``), plus
every live child's. `Sampler` reads the children every `every` seconds in a thread, and
keeps each one's last seen seconds and kind (its process title, and for a client backend
its `application_name` and last statement from pg_stat_activity), so that the seconds of
a child that exits are still told by kind; what a child spent after its last sample is
left in "exited, unattributed".
"""

from __future__ import annotations

import os
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import attrs

__all__ = ["PostgresCpu", "Sampler", "Snapshot", "process_cpu"]

_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_cpu(pid: int, *, reaped: bool = False) -> float:
    """CPU seconds of a live process (with `reaped`, of its waited-for children too)."""
    fields = _stat(pid)
    if fields is None:
        return 0.0
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime + (cutime + cstime if reaped else 0)) / _TICK


def children(parent: int) -> dict[int, float]:
    """The live children of `parent` and their CPU seconds."""
    found: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == parent:
            found[int(stat.parent.name)] = (int(fields[11]) + int(fields[12])) / _TICK
    return found


def title_kind(pid: int) -> str:
    """The kind of a PostgreSQL child from its process title."""
    try:
        title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return "gone"
    title = title.removeprefix("postgres: ")
    for kind in (
        "autovacuum worker",
        "autovacuum launcher",
        "checkpointer",
        "background writer",
        "walwriter",
        "logical replication launcher",
        "stats collector",
        "archiver",
    ):
        if title.startswith(kind):
            return kind
    return "client backend"


@attrs.frozen
class Snapshot:
    """CPU seconds at one moment: the total, and by kind (sampled)."""

    total: float
    by_kind: dict[str, float]

    def minus(self, before: Snapshot) -> Snapshot:
        kinds = set(self.by_kind) | set(before.by_kind)
        return Snapshot(
            self.total - before.total,
            {k: self.by_kind.get(k, 0.0) - before.by_kind.get(k, 0.0) for k in kinds},
        )


class PostgresCpu:
    """The postmaster `pid`'s whole process tree."""

    def __init__(self, postmaster: int) -> None:
        self.postmaster = postmaster

    def total(self) -> float:
        return process_cpu(self.postmaster, reaped=True) + sum(children(self.postmaster).values())


class Sampler(PostgresCpu):
    """`PostgresCpu` with each child's seconds kept by kind (a thread reads /proc every
    `every` seconds). `describe(pids)` names client backends: {pid: kind}, from
    pg_stat_activity (on a connection of the caller's, whose own pid `own` is told apart)."""

    def __init__(
        self,
        postmaster: int,
        describe: Callable[[list[int]], dict[int, str]] | None = None,
        every: float = 0.2,
    ) -> None:
        super().__init__(postmaster)
        self._describe = describe
        self._every = every
        self._kinds: dict[int, str] = {}
        self._last: dict[int, float] = {}  # live children's last seen seconds
        self._exited: dict[str, float] = defaultdict(float)  # seconds of exited ones by kind
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self.sample()
            except Exception:  # a racing exit; the next sample sees it
                continue

    def sample(self) -> None:
        live = children(self.postmaster)
        new = [pid for pid in live if pid not in self._kinds]
        kinds = {pid: title_kind(pid) for pid in new}
        backends = [pid for pid, kind in kinds.items() if kind == "client backend"]
        if backends and self._describe is not None:
            kinds.update(self._describe(backends))
        with self._lock:
            self._kinds.update(kinds)
            for pid in list(self._last):
                if pid not in live:
                    self._exited[self._kinds.get(pid, "?")] += self._last.pop(pid)
                    self._kinds.pop(pid, None)
            self._last.update(live)

    def snapshot(self) -> Snapshot:
        """The total now, and by kind: live children sampled now, exited ones as last seen;
        the rest of the reaped seconds (spent after a child's last sample, or by children
        never sampled) under "exited, unattributed"."""
        self.sample()
        with self._lock:
            reaped_total = process_cpu(self.postmaster, reaped=True) - process_cpu(self.postmaster)
            by_kind: dict[str, float] = defaultdict(float)
            by_kind["postmaster"] = process_cpu(self.postmaster)
            for pid, seconds in self._last.items():
                by_kind[self._kinds.get(pid, "?")] += seconds
            for kind, seconds in self._exited.items():
                by_kind[kind] += seconds
            by_kind["exited, unattributed"] = reaped_total - sum(self._exited.values())
            total = by_kind["postmaster"] + reaped_total + sum(self._last.values())
        return Snapshot(total, dict(by_kind))
