"""Status, headers and body -> typed error: pure, no server needed."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict, CIMultiDictProxy

import invoicing_async as ia
from invoicing_async._transport.response import error_for, is_budget_refusal, rate_headers
from invoicing_async.testing import MockSender, mock_response


def err(status: int, body: bytes = b"", **headers: str) -> ia.HTTPStatusError | None:
    return error_for(
        status,
        CIMultiDict(headers),
        body,
        fmt="xml",
        method="GET",
        url="https://acme.example.com/api/v1.0/invoices.xml",
        retry_after=42.0,
    )


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, ia.AuthenticationError),
        (403, ia.ForbiddenError),
        (404, ia.NotFoundError),
        (406, ia.NotAcceptableError),
        (422, ia.ValidationError),
        (500, ia.ServerError),
        (502, ia.ServerError),
        (501, ia.NotImplementedByServerError),
        (418, ia.HTTPStatusError),
    ],
)
def test_each_status_maps_to_its_exception(status: int, cls: type[Exception]) -> None:
    error = err(status, b"<error>nope</error>", **{"X-RateLimit-Remaining": "12"})
    assert type(error) is cls
    assert isinstance(error, ia.InvoicingError)
    assert error.status == status
    assert error.method == "GET"
    assert error.url.endswith("/invoices.xml")
    assert error.headers["X-RateLimit-Remaining"] == "12"
    assert "nope" in error.body_excerpt
    assert str(status) in str(error)


@pytest.mark.parametrize("status", [200, 201, 204])
def test_success_is_no_error(status: int) -> None:
    assert err(status) is None


def test_403_with_zero_remaining_is_the_budget() -> None:
    error = err(403, b"", **{"x-ratelimit-remaining": "0"})
    assert isinstance(error, ia.RateLimitExceeded)
    assert error.retry_after == 42.0
    assert "42s" in str(error)


def test_403_whose_body_says_rate_limit_is_the_budget() -> None:
    assert isinstance(err(403, b"Rate limit exceeded"), ia.RateLimitExceeded)


def test_other_403_is_forbidden_not_budget() -> None:
    error = err(403, b"You are not allowed to do this", **{"X-RateLimit-Remaining": "120"})
    assert type(error) is ia.ForbiddenError
    assert not is_budget_refusal(403, CIMultiDict({"X-RateLimit-Remaining": "3"}), b"")


@pytest.mark.parametrize(
    "body",
    [b"Rate limit exceeded", b"You have reached the limit of your plan", b"Too many requests"],
)
def test_a_403_with_budget_left_is_a_permission_refusal_whatever_the_body(body: bytes) -> None:
    """The header decides when present: 200 left is no spent budget, even if the body
    mentions a limit (and the client must not then stop sending for an hour)."""
    error = err(403, body, **{"X-RateLimit-Remaining": "200"})
    assert type(error) is ia.ForbiddenError
    assert not is_budget_refusal(403, CIMultiDict({"X-RateLimit-Remaining": "200"}), body)


def test_422_carries_field_errors() -> None:
    body = b"<errors><error><attribute>details</attribute><message>should contain at least one line</message></error></errors>"
    error = err(422, body)
    assert isinstance(error, ia.ValidationError)
    assert error.errors == [ia.FieldError("details", "should contain at least one line")]
    assert "details: should contain at least one line" in str(error)


def test_body_excerpt_is_short() -> None:
    error = err(500, b"x" * 10_000)
    assert error is not None
    assert len(error.body_excerpt) == 500


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"X-RateLimit-Limit": "350", "X-RateLimit-Remaining": "349"}, (350, 349)),
        ({"x-ratelimit-limit": "350", "X-RATELIMIT-REMAINING": "0"}, (350, 0)),
        ({"X-RateLimit-Remaining": "many"}, (None, None)),
        ({}, (None, None)),
    ],
)
def test_rate_headers_are_read_case_insensitively(
    headers: dict[str, str], expected: tuple[int | None, int | None]
) -> None:
    assert rate_headers(CIMultiDict(headers)) == expected
    assert rate_headers(CIMultiDictProxy(CIMultiDict(headers))) == expected
    assert rate_headers(headers) == expected


@pytest.mark.parametrize("value", ["-5", "abc", "", "1.5", "0x10", "0", " 7 "])
def test_a_limit_or_remaining_that_is_no_count_is_unknown(value: str) -> None:
    expected = int(value) if value.strip().isdigit() else None
    headers = CIMultiDictProxy(CIMultiDict({"X-RateLimit-Remaining": value}))
    assert rate_headers(headers) == (None, expected)
    limit = CIMultiDictProxy(CIMultiDict({"X-RateLimit-Limit": value}))
    assert rate_headers(limit) == (None if expected == 0 else expected, None)


async def test_a_200_with_negative_remaining_leaves_the_budget_alone() -> None:
    """A proxy's `-5` on a 200 once stopped the sync for two periods."""
    sender = MockSender(
        lambda request: mock_response(
            200,
            "<user><id type='integer'>1</id></user>",
            {"X-RateLimit-Limit": "350", "X-RateLimit-Remaining": "-5"},
        )
    )
    budget = ia.RateBudget()
    async with ia.InvoicingClient(
        "https://example.com", auth=ia.BasicAuth("u", "p"), budget=budget, sender=sender
    ) as client:
        await client.current_session()
    assert budget.available_now() == 349
    assert budget.snapshot().server_remaining is None


@pytest.mark.parametrize(
    ("value", "expected"), [(str(2**31 - 1), 2**31 - 1), (str(2**31), None), ("9" * 5000, None)]
)
def test_a_count_larger_than_any_budget_store_holds_is_unknown(
    value: str, expected: int | None
) -> None:
    headers = {"X-RateLimit-Limit": value, "X-RateLimit-Remaining": value}
    assert rate_headers(headers) == (expected, expected)
