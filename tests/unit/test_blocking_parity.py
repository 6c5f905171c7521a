"""The blocking client has every public method, argument and default of the async client
and of each of its resources (their `with_options` and `with_raw_response` views too),
computed from the async classes: a method added there is checked here with no change."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest

import invoicing_async as ia
from invoicing_async._blocking import blocking_type
from invoicing_async._resources.invoices import InvoicesResource

RENAMED = {"aclose": "close"}


def public_callables(obj: object) -> dict[str, Any]:
    """Every public method of `obj` (class members and instance members alike)."""
    names = {n for n in dir(obj) if not n.startswith("_")}
    return {n: getattr(obj, n) for n in names if callable(getattr(obj, n))}


def missing(async_obj: object, blocking_obj: object) -> list[str]:
    """What `blocking_obj` lacks of `async_obj`: methods, or differing parameters."""
    gaps = []
    for name, method in public_callables(async_obj).items():
        if isinstance(method, type):
            continue
        mine = getattr(blocking_obj, RENAMED.get(name, name), None)
        if mine is None:
            gaps.append(f"{name}: missing")
        elif inspect.signature(mine).parameters != inspect.signature(method).parameters:
            gaps.append(f"{name}: {inspect.signature(mine)} != {inspect.signature(method)}")
    return gaps


def pairs() -> Iterator[tuple[str, object, object]]:
    """(where, async object, blocking object) of the client and every view of it."""
    args: dict[str, Any] = {"auth": ia.BasicAuth("u", "p")}
    client = ia.InvoicingClient("https://acme.example.com", **args)
    blocking = ia.BlockingInvoicingClient("https://acme.example.com", **args)
    for where, a, b in [
        ("client", client, blocking),
        ("with_options", client.with_options(max_wait=0), blocking.with_options(max_wait=0)),
    ]:
        yield where, a, b
        yield f"{where}.with_raw_response", a.with_raw_response, b.with_raw_response
        for resource in ("invoices", "recurring_templates"):
            yield f"{where}.{resource}", getattr(a, resource), getattr(b, resource)
            yield (
                f"{where}.{resource}.with_raw_response",
                getattr(a, resource).with_raw_response,
                getattr(b, resource).with_raw_response,
            )
    blocking.close()


PAIRS = list(pairs())


@pytest.mark.parametrize(("where", "async_obj", "blocking_obj"), PAIRS, ids=[p[0] for p in PAIRS])
def test_the_blocking_side_has_every_method_argument_and_default(
    where: str, async_obj: object, blocking_obj: object
) -> None:
    assert public_callables(async_obj), where
    assert missing(async_obj, blocking_obj) == []


def test_the_constructor_takes_the_same_arguments() -> None:
    assert (
        inspect.signature(ia.BlockingInvoicingClient).parameters
        == inspect.signature(ia.InvoicingClient).parameters
    )


def test_a_method_added_to_the_async_side_is_there_with_no_change() -> None:
    class Grown(InvoicesResource):
        async def archive(self, invoice: int, *, reason: str = "done") -> None:
            """A new operation."""

    derived = blocking_type(Grown)
    assert inspect.signature(derived.archive).parameters == (  # type: ignore[attr-defined]
        inspect.signature(Grown.archive).parameters
    )


def test_the_check_fails_on_a_missing_method_or_default() -> None:
    class Async:
        async def get(self, ident: int, *, fresh: bool = False) -> None: ...

        async def delete(self, ident: int) -> None: ...

    class Lacking:
        def get(self, ident: int, *, fresh: bool = True) -> None: ...

    assert [gap.split(":")[0] for gap in sorted(missing(Async(), Lacking()))] == [
        "delete",
        "get",
    ]
