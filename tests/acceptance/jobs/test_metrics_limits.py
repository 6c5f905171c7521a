"""`worker --metrics-port` against slow and huge requests (issue 37): a client that sends
its request slowly, or never, loses its connection after `connection_timeout`; a huge
line or header is refused; a huge body is not read. In virtual time, over loopback."""

from __future__ import annotations

import asyncio

from invoicing_async._jobs.metrics import MetricsServer, RunMetrics
from invoicing_async._jobs.tasks import Jobs
from tests.virtual_time import run_virtual

#: The server is never asked for the database here: a Jobs that is never opened.
UNUSED_DATABASE = "postgresql://127.0.0.1:9/unused"


async def exchange(port: int, request: bytes) -> tuple[bytes, float]:
    """Send `request` (which may never finish) and read until the server closes; what it
    answered and the (virtual) seconds that took."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = loop.time()
    writer.write(request)
    try:
        answer = await asyncio.wait_for(reader.read(), 3600)  # virtual: an hour is a bound
    finally:
        writer.close()
    return answer, loop.time() - started


def test_slow_and_huge_requests_are_cut_off() -> None:
    async def scenario() -> None:
        server = MetricsServer(Jobs(UNUSED_DATABASE), RunMetrics(), port=0, connection_timeout=5)
        async with server:
            # Headers that never end (slowloris), and a connection that never sends.
            for request in (b"GET /metrics HTTP/1.1\r\nHost: x\r\n", b""):
                answer, seconds = await exchange(server.port, request)
                assert answer == b""
                assert 5 <= seconds <= 7.5
            # A line or a header past 4 KiB: refused at once.
            for request in (
                b"GET /" + b"m" * 5000 + b" HTTP/1.1\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * 5000 + b"\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\n" + b"X: a\r\n" * 40 + b"\r\n",
            ):
                answer, seconds = await exchange(server.port, request)
                assert answer.startswith(b"HTTP/1.0 400 Bad Request"), answer[:80]
                assert seconds < 1
            # A body of 10 GB announced on a path that reads none: answered, not read.
            answer, seconds = await exchange(
                server.port,
                b"GET /none HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n"
                + b"a" * 999,
            )
            assert answer.startswith(b"HTTP/1.1 404 Not Found")
            assert seconds <= 7.5

    run_virtual(scenario)
