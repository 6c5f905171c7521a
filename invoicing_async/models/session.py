"""The current session (`<user>` document) and the sync list entry."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from invoicing_async.models.base import Model, extra_field, read_only

__all__ = ["CurrentSession", "SyncEntry"]


@attrs.define(kw_only=True, repr=False)
class CurrentSession(Model):
    """The active user of the session (root element `<user>`)."""

    _repr_fields: ClassVar[tuple[str, ...]] = ("id", "name", "email", "language", "time_zone")

    id: int | None = read_only()
    email: str | None = read_only()
    name: str | None = read_only()
    language: str | None = read_only()
    time_zone: str | None = read_only()
    extra: dict[str, Any] = extra_field()


@attrs.frozen
class SyncEntry:
    """One row of the sync list: an invoice id and its current revision."""

    id: int
    revision: int
