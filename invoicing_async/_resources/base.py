"""What the resource clients share: the transport, the format, and validation switches."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from invoicing_async._models.documents import Format
from invoicing_async._transport.http import BoundTransport
from invoicing_async._wire.json import encode_json
from invoicing_async._wire.xml import encode_xml
from invoicing_async.errors import DecodeError, FieldError, ValidationError

__all__ = ["Resource", "id_from_location", "segment"]


def segment(value: str | int) -> str:
    """One URL path segment, escaped (`2014/0096` must not become two segments)."""
    return quote(str(value), safe="")


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
    ) -> None:
        self._transport = transport
        self._validate = validate
        self._today = today

    @property
    def _fmt(self) -> Format:
        return self._transport.fmt

    def _check(self, errors: Sequence[FieldError], method: str, path: str) -> None:
        """Raise the 422 the service would give, before spending a request on it."""
        if self._validate and errors:
            raise ValidationError(errors, method=method, url="")

    def _encode(self, root: str, data: dict[str, Any]) -> bytes:
        """A request body of wire names and values, wrapped in `root`."""
        if self._fmt == "xml":
            return encode_xml(root.replace("_", "-"), data)
        return encode_json(root, data)
