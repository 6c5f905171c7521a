"""What the resource clients share: the transport, the format, and validation switches."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

from invoicing_async._models.payloads import Format
from invoicing_async._resources.raw import RawOperations, operations_of
from invoicing_async._transport.http import BoundTransport
from invoicing_async._writes.core import Intent
from invoicing_async._writes.journal import MemoryJournal
from invoicing_async._writes.once import Answer, KeyedWrite, Send, Writes
from invoicing_async.errors import DecodeError, FieldError, ValidationError

__all__ = ["Identified", "Resource", "id_from_location", "id_of", "segment", "sets_attributes_only"]


class Identified(Protocol):
    """A model read from the service: its numeric `id` is set (None only before create)."""

    @property
    def id(self) -> int | None: ...


IdentifiedT = TypeVar("IdentifiedT", bound=Identified)
ResourceT = TypeVar("ResourceT", bound="Resource")


def id_of(target: int | IdentifiedT, cls: type[IdentifiedT]) -> int:
    """The numeric id of `target`: an id as given, or the `id` of a `cls` model; a model
    without id raises `ValueError`, any other object `TypeError`, before anything is sent."""
    if isinstance(target, int):
        return target
    if not isinstance(target, cls):
        kind = type(target).__name__
        raise TypeError(f"expected {cls.__name__} or an id (int), got {kind}")
    ident = target.id
    if ident is None:
        raise ValueError(
            f"this {cls.__name__} has no id: pass one created by or read from the service"
        )
    return ident


def segment(value: str | int) -> str:
    """One URL path segment, escaped (`2014/0096` must not become two segments)."""
    if value.__class__ is int:
        return str(value)  # digits and "-": nothing to escape
    return quote(str(value), safe="")


def sets_attributes_only(changes: Mapping[str, Any]) -> bool:
    """Whether an update only sets values (lines named by id included), so that it may be
    retried after a 5xx: a line without id would be added twice."""
    return all(line.id is not None and not line.destroy for line in changes.get("details") or ())


def id_from_location(location: str | None) -> int:
    """The id at the end of a `Location` header (`…/invoices/42.xml` -> 42)."""
    if location:
        tail = location.rstrip("/").rsplit("/", 1)[-1].split(".", 1)[0]
        if tail.isdigit():
            return int(tail)
    raise DecodeError("create answered without a body and without a usable Location header")


class Resource:
    """Base of `client.invoices` and `client.recurring_templates`."""

    def __init__(
        self,
        transport: BoundTransport,
        *,
        validate: bool = True,
        today: Callable[[], dt.date] = dt.date.today,
        writes: Writes | None = None,
    ) -> None:
        self._transport = transport
        self._fmt: Format = transport.fmt
        self._validate = validate
        self._today = today
        self._writes = writes if writes is not None else Writes(MemoryJournal(), "")

    @property
    def with_raw_response(self: ResourceT) -> RawOperations[ResourceT]:
        """Every operation, returning an `APIResponse` (status, headers, elapsed time,
        ``.parse()`` for the usual model): ``await client.invoices.with_raw_response.get(42)``."""
        return RawOperations(self._transport, self._rewired, operations_of(type(self)))

    def _rewired(self: ResourceT, transport: BoundTransport) -> ResourceT:
        """This resource sending through `transport` (the raw view's recorder)."""
        clone = copy.copy(self)
        clone._transport = transport  # noqa: SLF001 - setting up the copy of self
        return clone

    def _write(self, method: str, path: str, write: Callable[..., bytes], *args: Any) -> bytes:
        """The body `write(*args, fmt)` gives; a value no request may carry is refused
        naming this call (`ValidationError` or its `InvalidArgumentError`, nothing sent)."""
        try:
            return write(*args, self._fmt)
        except ValidationError as exc:
            raise type(exc)(exc.errors, method=method, url=path) from None

    def _check(self, errors: Sequence[FieldError], method: str, path: str) -> None:
        """Raise the 422 the service would give, before spending a request on it (values no
        request may carry are refused when the body is written, even with `validate=False`)."""
        if self._validate and errors:
            raise ValidationError(errors, method=method, url=path)

    async def _once(self, write: KeyedWrite, send: Send) -> bytes:
        """The answer of a keyed write, applied at most once (the journal's, when it was)."""
        return await self._writes.run(write, send, self._look, self._transport.options.retry)

    async def _look(self, intent: Intent) -> Answer | None:
        """What the service shows of a keyed write: its answer when applied, None when not."""
        raise NotImplementedError(intent.kind)
