"""The push receiver: our secret, strict input, coalescing, and one fetch per batch of ids."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import httpx
import pytest
import uvicorn
from aiohttp import web
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.routing import Mount
from yarl import URL

import invoicing_async as ia
from invoicing_async.sync import MemoryStore, PushReceiver, SyncEngine, follow_pushes
from invoicing_async.testing import FakeInvoicingService, populate
from tests.events import until

SECRET = "s3cret-push-token-0123456789"


Poster = Callable[..., Awaitable[int]]


@asynccontextmanager
async def aiohttp_receiver(receiver: PushReceiver) -> AsyncIterator[Poster]:
    """The receiver in an aiohttp app, served on loopback."""
    app = web.Application()
    app.add_routes(receiver.routes())
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]

    async def post(path: str, data: object, headers: dict[str, str] | None = None) -> int:
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"http://{host}:{port}/push{path}", data=data, headers=headers) as resp,
        ):
            return resp.status

    try:
        yield post
    finally:
        await runner.cleanup()


@asynccontextmanager
async def asgi_receiver(receiver: PushReceiver, framework: str) -> AsyncIterator[Poster]:
    """The receiver mounted in a Starlette or FastAPI app, called through httpx."""
    app: Any
    if framework == "fastapi":
        app = FastAPI()
        app.mount("/push", receiver.asgi())
    else:
        app = Starlette(routes=[Mount("/push", app=receiver.asgi())])
    transport = httpx.ASGITransport(app=app)

    async def post(path: str, data: object, headers: dict[str, str] | None = None) -> int:
        path = path or "/"  # a mount answers its bare prefix with a redirect to "prefix/"
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            if isinstance(data, bytes):
                response = await http.post(f"/push{path}", content=data, headers=headers)
            else:
                response = await http.post(f"/push{path}", data=data, headers=headers)  # type: ignore[arg-type]
            return response.status_code

    yield post


@pytest.fixture(params=["aiohttp", "starlette", "fastapi"])
async def receiver_post(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[PushReceiver, Poster]]:
    receiver = PushReceiver(SECRET)
    framework = str(request.param)
    served = (
        aiohttp_receiver(receiver) if framework == "aiohttp" else asgi_receiver(receiver, framework)
    )
    async with served as post:
        yield receiver, post


async def test_accepts_our_secret_in_path_or_header(
    receiver_post: tuple[PushReceiver, Poster],
) -> None:
    receiver, post = receiver_post
    assert await post(f"/{SECRET}", {"invoice_id": "5", "state": "paid"}) == 200
    assert await post("", {"invoice_id": "6", "state": "late"}, {"X-Push-Secret": SECRET}) == 200
    assert receiver.pending == {5: "paid", 6: "late"}
    assert sorted(receiver.take()) == [5, 6]
    assert receiver.pending == {}


FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize(
    ("path", "data", "headers", "status"),
    [
        ("/wrong-secret-wrong-secret", {"invoice_id": "5", "state": "paid"}, {}, 403),
        ("", {"invoice_id": "5", "state": "paid"}, {}, 403),
        ("", {"invoice_id": "5", "state": "paid"}, {"X-Push-Secret": "nope"}, 403),
        (f"/{SECRET}", {"state": "paid"}, {}, 400),
        (
            f"/{SECRET}",
            {"invoice_id": "5", "state": "paid", "note": "extra fields are ignored"},
            {},
            200,
        ),
        (f"/{SECRET}", b"invoice_id=5&invoice_id=6&state=paid", FORM_HEADERS, 400),
        (f"/{SECRET}", {"invoice_id": "abc", "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "-3", "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "0", "state": "paid"}, {}, 400),
        # Ids int() would take but the service never writes: other scripts' digits,
        # underscores, signs, blanks, and more digits than any id has.
        (f"/{SECRET}", {"invoice_id": "٤٢", "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "4_2", "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "+42", "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": " 42", "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "1" * 19, "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "9" * 1000, "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "5", "state": "x" * 200}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "5", "state": "pa id"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "5", "state": "pаid"}, {}, 400),  # Cyrillic а
        (f"/{SECRET}", b'{"invoice_id": 5}', {"Content-Type": "application/json"}, 415),
        (f"/{SECRET}", b"invoice_id=5&state=" + b"p" * 10_000, FORM_HEADERS, 413),
    ],
)
async def test_rejects_forged_malformed_and_oversized(
    receiver_post: tuple[PushReceiver, Poster],
    path: str,
    data: object,
    headers: dict[str, str],
    status: int,
) -> None:
    receiver, post = receiver_post
    assert await post(path, data, headers) == status
    if status == 200:
        assert receiver.pending == {5: "paid"}
    else:
        assert receiver.pending == {}
        assert receiver.rejected == 1


@pytest.mark.parametrize("framework", ["aiohttp", "fastapi"])
async def test_a_secret_header_that_is_not_utf8_is_refused(framework: str) -> None:
    receiver = PushReceiver(SECRET)
    body = b"invoice_id=5&state=paid"
    path = b"/push" if framework == "aiohttp" else b"/push/"  # a mount's bare prefix redirects
    async with receiver_served(framework, receiver) as url:
        target = URL(url)
        reader, writer = await asyncio.open_connection(target.host, target.port)
        writer.write(
            b"POST " + path + b" HTTP/1.1\r\nHost: push.test\r\n"
            b"X-Push-Secret: \xff\xfe" + SECRET.encode() + b"\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
        )
        status_line = await reader.readline()
        writer.close()
        await writer.wait_closed()
    assert status_line.split()[1] == b"403", status_line
    assert receiver.pending == {}


async def test_a_flood_of_the_same_id_is_coalesced(
    receiver_post: tuple[PushReceiver, Poster],
) -> None:
    receiver, post = receiver_post
    statuses = await asyncio.gather(
        *(post(f"/{SECRET}", {"invoice_id": "9", "state": "paid"}) for _ in range(50))
    )
    assert set(statuses) == {200}
    assert receiver.take() == [9]
    assert receiver.coalesced == 49


def test_short_secrets_are_refused() -> None:
    with pytest.raises(ValueError, match="16"):
        PushReceiver("short")
    assert SECRET not in repr(PushReceiver(SECRET))


def test_an_id_pushed_again_while_claimed_stays_pending() -> None:
    receiver = PushReceiver(SECRET)
    assert receiver.receive_form(b"invoice_id=1&state=open").status == 200
    assert receiver.receive_form(b"invoice_id=2&state=open").status == 200
    claimed = receiver.claim()
    assert receiver.receive_form(b"invoice_id=2&state=paid").status == 200  # during the fetch
    receiver.settle(claimed)
    assert receiver.pending == {2: "paid"}


@asynccontextmanager
async def served_with_uvicorn(app: Any) -> AsyncIterator[str]:
    """An ASGI app served for real on loopback; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        await until(lambda: server.started, "uvicorn started")
        assert server.started
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        await task


@asynccontextmanager
async def receiver_served(framework: str, receiver: PushReceiver) -> AsyncIterator[str]:
    """The push URL of `receiver` in a real server of the given framework."""
    if framework == "aiohttp":
        app = web.Application()
        app.add_routes(receiver.routes())
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        host, port = runner.addresses[0][:2]
        try:
            yield f"http://{host}:{port}/push/{SECRET}"
        finally:
            await runner.cleanup()
        return
    fastapi_app = FastAPI()
    fastapi_app.mount("/push", receiver.asgi())
    async with served_with_uvicorn(fastapi_app) as base:
        yield f"{base}/push/{SECRET}"


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["aiohttp", "fastapi"])
async def test_pushes_from_the_service_are_fetched_in_one_batch(framework: str) -> None:
    receiver = PushReceiver(SECRET)
    async with (
        receiver_served(framework, receiver) as push_url,
        FakeInvoicingService(limit=10_000) as service,
    ):
        service.account.push_url = push_url
        populate(service.account, 30, seed=2)
        store = MemoryStore()
        async with service.client() as client:
            engine = SyncEngine(client, store)
            await engine.run()
            service.clock.advance(days=500)  # every open invoice falls due: pushes "late"
            await client.current_session()  # the service notices on its next request
            await service.wait_pushes()
            pushed = receiver.pending
            assert pushed
            assert set(pushed.values()) == {"late"}
            before = len(service.account.requests)
            stop = asyncio.Event()
            task = asyncio.create_task(follow_pushes(engine, receiver, interval=0.05, stop=stop))
            await until(lambda: not receiver.pending, "the follower stored the pushes")
            stop.set()
            (report,) = await task
        assert report.requests == 1  # all pushes, one sync-fetch request
        assert len(service.account.requests) - before == 1
        for ident in pushed:
            stored = await store.get(ident)
            assert stored is not None
            assert stored.state == "late"


async def test_pushes_survive_an_outage_of_the_service() -> None:
    """Ids leave the receiver only once stored: 250 pushes during an outage all arrive."""
    receiver = PushReceiver(SECRET)
    async with FakeInvoicingService(invoices=300, seed=4, limit=100_000) as service:
        store = MemoryStore()
        async with service.client(retry=ia.RetryPolicy.none()) as client:
            engine = SyncEngine(client, store, max_batch_failures=1)
            await engine.run()
            changed = sorted(service.account.invoices)[:250]
            for ident in changed:
                service.account.update_invoice(ident, {"po_number": f"PO-{ident}"})
                assert (
                    receiver.receive_form(f"invoice_id={ident}&state=open".encode()).status == 200
                )
            service.account.faults.error_rate = 1.0  # the outage: every request answers 500
            stop = asyncio.Event()
            task = asyncio.create_task(follow_pushes(engine, receiver, interval=0.01, stop=stop))
            await until(lambda: service.account.counters["500"] >= 3, "three failed fetches")
            assert sorted(receiver.pending) == changed  # nothing dropped while failing
            service.account.faults.error_rate = 0.0  # recovery
            await until(lambda: not receiver.pending, "every push stored after the outage")
            stop.set()
            await task
        assert receiver.pending == {}
        for ident in changed:
            stored = await store.get(ident)
            assert stored is not None
            assert stored.po_number == f"PO-{ident}"


async def test_pushes_cut_off_mid_body_log_no_error(caplog: pytest.LogCaptureFixture) -> None:
    """Each aborted push once logged an ERROR with a ConnectionResetError traceback."""
    receiver = PushReceiver(SECRET)
    app = web.Application()
    app.add_routes(receiver.routes())
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    caplog.set_level(logging.DEBUG)
    try:
        for _ in range(50):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                f"POST /push/{SECRET} HTTP/1.1\r\nHost: x\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\n"
                "Content-Length: 1000\r\n\r\ninvoice_id=1".encode()
            )
            await writer.drain()
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()  # a reset, mid-body
            await reader.read()
    finally:
        await runner.cleanup()
    assert receiver.pending == {}
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert not [r for r in caplog.records if r.exc_info]
