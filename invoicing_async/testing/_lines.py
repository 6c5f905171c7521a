"""Line changes of an update, as Rails' `details_attributes` applies them: the same for
invoice lines and template lines."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any, TypeVar

import attrs

from invoicing_async._models.base import DetailLine
from invoicing_async.errors import FieldError
from invoicing_async.models import Invoice, RecurringTemplate
from invoicing_async.testing._rules import Unprocessable, without

__all__ = ["new_line", "with_changes"]

L = TypeVar("L", bound=DetailLine)
E = TypeVar("E", Invoice, RecurringTemplate)


def new_line(line: L, ident: int, now: dt.datetime, **more: Any) -> L:
    """`line` as the service stores a new one: its id and times, price 0 when none, no
    request flag and nothing unknown."""
    price = line.price if line.price is not None else Decimal("0.0")
    return attrs.evolve(
        line, id=ident, price=price, destroy=None, created_at=now, updated_at=now, extra={}, **more
    )


def with_changes(
    entity: E,
    changes: Mapping[str, Any],
    *,
    new_line: Callable[[dict[str, Any]], Any],
    now: dt.datetime,
) -> E:
    """A copy of `entity` (an invoice or a template) with `changes` set; its lines change as
    `_line_changes` says (`new_line` builds an added one)."""
    candidate = attrs.evolve(entity, details=list(entity.details))
    for name, value in changes.items():
        if name == "details":
            value = _line_changes(candidate.details, value or [], new_line=new_line, now=now)
        setattr(candidate, name, value)
    return candidate


def _line_changes(
    lines: list[L],
    changes: Iterable[Mapping[str, Any]],
    *,
    new_line: Callable[[dict[str, Any]], L],
    now: dt.datetime,
) -> list[L]:
    """The lines after `changes`: no id adds a line (`new_line` builds it), an id with
    fields changes that line, an id with `destroy` deletes it. An unknown id is a 422."""
    result = list(lines)
    for change in changes:
        line_id = change.get("id")
        if line_id is None:
            if not change.get("destroy"):
                result.append(new_line(without(change, "id", "destroy")))
            continue
        if not any(line.id == line_id for line in result):
            raise Unprocessable([FieldError("details.id", f"line {line_id} does not exist")])
        if change.get("destroy"):
            result = [line for line in result if line.id != line_id]
            continue
        result = [
            attrs.evolve(line, **without(change, "id", "destroy"), updated_at=now)
            if line.id == line_id
            else line
            for line in result
        ]
    return result
