"""Per-call options, settings from the environment, and a replaceable sender."""

from __future__ import annotations

import asyncio

import pytest

import invoicing_async as ia
from invoicing_async.testing import (
    MockSender,
    OutgoingRequest,
    RawResponse,
    SendError,
    mock_response,
)
from tests.scripted import Reply, ScriptedAPI, Seen, scripted_client
from tests.virtual_time import run_virtual

SESSION = b"<user><email>api-user@example.com</email><name>Api</name></user>"


def make_client(sender: MockSender, **kwargs: object) -> ia.InvoicingClient:
    return ia.InvoicingClient(
        "https://acme.example.com",
        auth=ia.BasicAuth("api-user", "pw"),
        sender=sender,
        **kwargs,  # type: ignore[arg-type]
    )


async def test_with_options_fails_fast_while_the_client_waits() -> None:
    budget = ia.RateBudget(limit=2, period=3600.0)  # 2 now, more in an hour
    sender = MockSender(lambda _request: mock_response(200, SESSION))
    async with make_client(sender, budget=budget, max_wait=None) as client:
        await client.current_session()
        await client.current_session()  # the whole budget
        fast = client.with_options(max_wait=0)
        with pytest.raises(ia.RateLimitExceeded) as info:
            await fast.current_session()
        assert info.value.status == 0  # refused before sending
        # The original still waits (and would until the hour is over).
        waiting = asyncio.ensure_future(client.current_session())
        await asyncio.sleep(0.05)
        assert not waiting.done()
        waiting.cancel()
        assert fast.requests_sent == client.requests_sent == 2  # one transport, one count
        assert fast.budget is client.budget


async def test_with_options_changes_timeout_and_retry_per_call() -> None:
    calls: list[OutgoingRequest] = []

    def flaky(request: OutgoingRequest) -> RawResponse:
        calls.append(request)
        return mock_response(503, b"busy")

    sender = MockSender(flaky)
    retry = ia.RetryPolicy(attempts=3, base_delay=0.0, max_delay=0.0)
    async with make_client(sender, budget=ia.RateBudget(limit=1000), retry=retry) as client:
        with pytest.raises(ia.ServerError):
            await client.current_session()
        assert len(calls) == 3
        once = client.with_options(retry=ia.RetryPolicy.none(), timeout=2.5)
        with pytest.raises(ia.ServerError):
            await once.current_session()
        assert len(calls) == 4
        assert calls[-1].timeout.total == 2.5
        assert calls[0].timeout.total == 60.0


async def test_a_connection_failure_from_the_sender_is_retried_for_get() -> None:
    attempts = 0

    def handler(request: OutgoingRequest) -> RawResponse:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            raise SendError(ia.APIConnectionError("reset", method="GET"), connected=True)
        return mock_response(200, SESSION)

    retry = ia.RetryPolicy(attempts=2, base_delay=0.0, max_delay=0.0)
    async with make_client(MockSender(handler), retry=retry) as client:
        me = await client.current_session()
    assert me.email == "api-user@example.com"
    assert attempts == 2


async def test_from_env_reads_the_documented_variables() -> None:
    env = {
        "INVOICING_BASE_URL": "https://acme.example.com",
        "INVOICING_FORMAT": "json",
        "INVOICING_USERNAME": "api-user",
        "INVOICING_PASSWORD": "pw",
    }
    sender = MockSender(lambda _r: mock_response(200, b'{"user": {"email": "a@b.c"}}'))
    async with ia.InvoicingClient.from_env(env, sender=sender) as client:
        assert client.format == "json"
        assert str(client.base_url) == "https://acme.example.com"
        assert (await client.current_session()).email == "a@b.c"
    (request,) = sender.requests
    assert request.headers["Authorization"] == "Basic YXBpLXVzZXI6cHc="
    assert request.headers["Accept"] == "application/json"
    with pytest.raises(ia.ConfigurationError, match="INVOICING_BASE_URL"):
        ia.InvoicingClient.from_env({})


async def test_a_permission_403_does_not_stop_the_next_call() -> None:
    replies = iter(
        [
            mock_response(403, b"Limit of your plan reached", {"X-RateLimit-Remaining": "200"}),
            mock_response(200, SESSION, {"X-RateLimit-Remaining": "199"}),
        ]
    )
    sender = MockSender(lambda _request: next(replies))
    async with make_client(sender, max_wait=0) as client:
        with pytest.raises(ia.ForbiddenError):
            await client.current_session()
        me = await client.current_session()  # not refused locally for an hour
    assert me.email == "api-user@example.com"
    assert client.budget.snapshot().server_remaining == 199


def test_a_deadline_bounds_the_whole_call_retries_included() -> None:
    """A slow server (a slowloris): `timeout` per attempt, `deadline` for the whole call."""

    async def scenario() -> None:
        async with ScriptedAPI() as server:

            async def slow(_seen: Seen) -> Reply:
                await asyncio.sleep(2.9)
                return 200, SESSION, {}

            server.script("GET", "/api/v1.0/current_session.xml", slow, times=10)
            retry = ia.RetryPolicy(attempts=4, base_delay=0.5, max_delay=0.5, jitter=False)
            async with scripted_client(server, timeout=3.0, retry=retry) as client:
                loop = asyncio.get_running_loop()
                start = loop.time()
                await client.current_session()  # without a deadline: 2.9 s, one attempt
                assert loop.time() - start == pytest.approx(2.9, abs=0.1)
                server.script("GET", "/api/v1.0/current_session.xml", slow, times=10)
                bounded = client.with_options(deadline=4.0, timeout=1.2)
                start = loop.time()
                with pytest.raises(ia.APITimeoutError, match=r"deadline=4s \(3 attempt"):
                    await bounded.current_session()
                assert loop.time() - start == pytest.approx(4.0, abs=0.1)

    run_virtual(scenario)


def test_a_deadline_shorter_than_the_budget_wait_fails_at_once() -> None:
    async def scenario() -> None:
        sender = MockSender(lambda _request: mock_response(200, SESSION))
        budget = ia.RateBudget(limit=1)
        async with make_client(sender, budget=budget, max_wait=None, deadline=30.0) as client:
            await client.current_session()
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(ia.RateLimitExceeded):
                await client.current_session()  # the next unit is an hour away
            assert loop.time() == start

    run_virtual(scenario)
