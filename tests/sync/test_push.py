"""The push receiver: our secret, strict input, coalescing, and one fetch per batch of ids."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from invoicing_async.sync import MemoryStore, PushReceiver, SyncEngine, follow_pushes
from invoicing_async.testing import FakeInvoicingService, populate

SECRET = "s3cret-push-token-0123456789"


@pytest.fixture
async def receiver_url() -> AsyncIterator[tuple[PushReceiver, str]]:
    receiver = PushReceiver(SECRET)
    app = web.Application()
    app.add_routes(receiver.routes())
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield receiver, f"http://127.0.0.1:{port}/push"
    await runner.cleanup()


async def post(url: str, data: object, **kwargs: object) -> int:
    async with aiohttp.ClientSession() as http, http.post(url, data=data, **kwargs) as resp:  # type: ignore[arg-type]
        return resp.status


async def test_accepts_our_secret_in_path_or_header(receiver_url: tuple[PushReceiver, str]) -> None:
    receiver, url = receiver_url
    assert await post(f"{url}/{SECRET}", {"invoice_id": "5", "state": "paid"}) == 200
    assert (
        await post(url, {"invoice_id": "6", "state": "late"}, headers={"X-Push-Secret": SECRET})
        == 200
    )
    assert receiver.pending == {5: "paid", 6: "late"}
    assert sorted(receiver.take()) == [5, 6]
    assert receiver.pending == {}


@pytest.mark.parametrize(
    ("path", "data", "headers", "status"),
    [
        ("/wrong-secret-wrong-secret", {"invoice_id": "5", "state": "paid"}, {}, 403),
        ("", {"invoice_id": "5", "state": "paid"}, {}, 403),
        ("", {"invoice_id": "5", "state": "paid"}, {"X-Push-Secret": "nope"}, 403),
        (f"/{SECRET}", {"state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "abc", "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "-3", "state": "paid"}, {}, 400),
        (f"/{SECRET}", {"invoice_id": "5", "state": "x" * 200}, {}, 400),
        (f"/{SECRET}", b'{"invoice_id": 5}', {"Content-Type": "application/json"}, 415),
        (
            f"/{SECRET}",
            b"invoice_id=5&state=" + b"p" * 10_000,
            {"Content-Type": "application/x-www-form-urlencoded"},
            413,
        ),
    ],
)
async def test_rejects_forged_malformed_and_oversized(
    receiver_url: tuple[PushReceiver, str],
    path: str,
    data: object,
    headers: dict[str, str],
    status: int,
) -> None:
    receiver, url = receiver_url
    assert await post(url + path, data, headers=headers) == status
    assert receiver.pending == {}
    assert receiver.rejected == 1


async def test_a_flood_of_the_same_id_is_coalesced(receiver_url: tuple[PushReceiver, str]) -> None:
    receiver, url = receiver_url
    statuses = await asyncio.gather(
        *(post(f"{url}/{SECRET}", {"invoice_id": "9", "state": "paid"}) for _ in range(50))
    )
    assert set(statuses) == {200}
    assert receiver.take() == [9]
    assert receiver.coalesced == 49


def test_short_secrets_are_refused() -> None:
    with pytest.raises(ValueError, match="16"):
        PushReceiver("short")
    assert SECRET not in repr(PushReceiver(SECRET))


async def test_pushes_from_the_service_are_fetched_in_one_batch(
    receiver_url: tuple[PushReceiver, str],
) -> None:
    receiver, url = receiver_url
    async with FakeInvoicingService(limit=10_000) as service:
        service.account.push_url = f"{url}/{SECRET}"
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
            for _ in range(100):  # until the follower has taken and fetched the pushes
                if not receiver.pending and service.account.counters["sync_fetch"] > 1:
                    break
                await asyncio.sleep(0.02)
            stop.set()
            (report,) = await task
        assert report.requests == 1  # all pushes, one sync-fetch request
        assert len(service.account.requests) - before == 1
        for ident in pushed:
            stored = await store.get(ident)
            assert stored is not None
            assert stored.state == "late"
