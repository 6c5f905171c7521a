"""The fake service in its own process, so that its CPU and memory are not counted as ours."""

from __future__ import annotations

import asyncio
import ssl
import sys
import tempfile
from pathlib import Path
from types import TracebackType

import invoicing_async as ia


class FakeServerProcess:
    """`invoicing-async fake-server` started on a free port; read its address from stdout."""

    def __init__(
        self, *, invoices: int, latency: float = 0.0, accounts: int = 1, tls: bool = True
    ) -> None:
        self.tls = tls
        self.args = [
            "--port",
            "0",
            "--invoices",
            str(invoices),
            "--limit",
            "1000000000",
            "--latency",
            str(latency),
            "--accounts",
            str(accounts),
            "--password",
            "bench-pw",
            *([] if tls else ["--no-tls"]),
        ]
        self._dir = tempfile.TemporaryDirectory()
        self.ca = Path(self._dir.name) / "ca.pem"
        self.base_url = ""
        self.process: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> FakeServerProcess:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "invoicing_async",
            "fake-server",
            *self.args,
            "--ca-out",
            str(self.ca),
            stdout=asyncio.subprocess.PIPE,
        )
        assert self.process.stdout is not None
        while True:
            line = (await asyncio.wait_for(self.process.stdout.readline(), 300)).decode()
            if not line:
                raise RuntimeError("the fake server exited")
            if "base URL:" in line:
                self.base_url = line.split("base URL:")[1].strip()
            if "Ctrl-C" in line:
                return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self.process is not None
        self.process.terminate()
        await self.process.wait()
        self._dir.cleanup()

    def client(self, username: str = "api-user", **kwargs: object) -> ia.InvoicingClient:
        context = ssl.create_default_context(cafile=str(self.ca)) if self.tls else None
        kwargs.setdefault("budget", ia.RateBudget(limit=10**9))
        return ia.InvoicingClient(
            self.base_url,
            auth=ia.BasicAuth(username, "bench-pw"),
            ssl=context,
            **kwargs,  # type: ignore[arg-type]
        )
