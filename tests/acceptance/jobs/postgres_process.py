"""A PostgreSQL server process of a test's own, which it may kill and start again, or
start with settings of its own (`shared_preload_libraries`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.servers import (
    ServerUnavailable,
    _as_user,
    _wait_for_port,
    _wait_for_postgres,
    free_port,
    postgres_bindir,
)

__all__ = ["RestartablePostgres"]


class RestartablePostgres:
    """A PostgreSQL whose data outlives its process: `kill()` (SIGKILL to the server and
    its backends) and `start()` again on the same port, as a crashed server restarts."""

    def __init__(self, *settings: str) -> None:
        bindir = postgres_bindir()
        if bindir is None:
            raise ServerUnavailable("no PostgreSQL binaries")
        self.bindir = bindir
        self.as_user = _as_user()
        self.root = Path(tempfile.mkdtemp(prefix="ia-pg-restart-"))
        self.data, self.sockets = self.root / "data", self.root / "sockets"
        self.log = self.root / "postgres.log"
        self.sockets.mkdir()
        uid = self.as_user.get("user")
        if uid is not None:
            for path in (self.root, self.sockets):
                os.chown(path, uid, self.as_user["group"])
        init = subprocess.run(
            [str(bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
             "--no-sync", "-E", "UTF8"],
            capture_output=True, env={**os.environ, "LC_ALL": "C"}, check=False, **self.as_user,
        )  # fmt: skip
        if init.returncode != 0:
            raise ServerUnavailable(f"initdb failed: {init.stderr.decode(errors='replace')}")
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.settings = [arg for setting in settings for arg in ("-c", setting)]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        with self.log.open("ab") as out:
            if self.as_user.get("user") is not None:
                os.chown(self.log, self.as_user["user"], self.as_user["group"])
            self.process = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                 "-k", str(self.sockets), "-c", "listen_addresses=127.0.0.1",
                 "-c", "fsync=off", "-c", "max_connections=50", *self.settings],
                stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "LC_ALL": "C"},
                start_new_session=True, **self.as_user,
            )  # fmt: skip
        _wait_for_port(self.port, self.process, self.log)
        _wait_for_postgres(self.port, self.process, self.log)

    def kill(self) -> None:
        """SIGKILL the postmaster and every backend (its process group), as a crash does."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        shutil.rmtree(self.root, ignore_errors=True)
