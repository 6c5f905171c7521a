"""Whole documents read back: response bodies of either format -> models (what the client
writes lives in `payloads`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from invoicing_async._models.base import Model
from invoicing_async._models.converter import structure
from invoicing_async._models.fields import snake_name
from invoicing_async._models.payloads import ROOTS, Format, unwrap_root
from invoicing_async._models.session import SyncRevisions
from invoicing_async._wire.json import decode_json, iter_members
from invoicing_async._wire.json_sync import read_json_sync_pairs
from invoicing_async._wire.scalars import check_int_range, parse_int
from invoicing_async._wire.xml import decode_xml, decode_xml_members, read_xml_sync_pairs
from invoicing_async.errors import DecodeError, FieldError

__all__ = [
    "Format",
    "MemberError",
    "each_member",
    "each_model_batch",
    "list_root_check",
    "load_document",
    "load_field_errors",
    "load_list",
    "load_model",
    "load_one_of",
    "load_sync_revisions",
    "member_id",
    "member_limit",
    "unwrap_member",
]

M = TypeVar("M", bound=Model)


def _decode(body: bytes, fmt: Format) -> tuple[str | None, Any]:
    """(root in snake_case or None when bare, content) of a response body."""
    if fmt == "xml":
        root, value = decode_xml(body)
        return snake_name(root), value
    return unwrap_root(decode_json(body))


def load_document(body: bytes, fmt: Format) -> Any:
    """A body as plain data, for calls the SDK has no model of: JSON as sent (decimals
    exact), XML as ``{root: content}`` with typed scalars; None for an empty body."""
    if not body.strip():
        return None
    if fmt == "xml":
        root, value = decode_xml(body)
        return {root: value}
    return decode_json(body)


def load_model(body: bytes, fmt: Format, cls: type[M]) -> M:
    """One model from a response body (`<invoice>…</invoice>` or `{"invoice": {…}}`).

    A bare JSON object (no root) is read as `cls`.
    """
    expected = ROOTS[cls][0]
    root, value = _decode(body, fmt)
    if root is not None and root != expected:
        raise DecodeError(f"expected a {expected!r} document, got {root!r}")
    return _structure_document(root, value, cls)


def load_one_of(body: bytes, fmt: Format, classes: Sequence[type[Model]]) -> Model | None:
    """The model of whichever of `classes` the body's root names, for an operation the
    service answered in several ways over time.

    None when the body is empty, or a bare JSON object (no root tells which it is): the
    caller then asks for what it needs. Any other root raises `DecodeError`.
    """
    if not body.strip():
        return None
    root, value = _decode(body, fmt)
    if root is None and isinstance(value, dict):
        return None
    for cls in classes:
        if root == ROOTS[cls][0]:
            return _structure_document(root, value, cls)
    names = " or ".join(repr(ROOTS[cls][0]) for cls in classes)
    got = repr(root) if root is not None else type(value).__name__
    raise DecodeError(f"expected a {names} document, got {got}")


def _structure_document(root: str | None, value: Any, cls: type[M]) -> M:
    if root is None and not isinstance(value, dict):
        raise DecodeError(f"expected a {ROOTS[cls][0]!r} object, got {type(value).__name__}")
    if value == "":
        value = {}  # <invoice/>: an element without attributes
    return structure(value, cls)


def _members(body: bytes, single: str, many: str) -> list[Any]:
    """The members of a JSON list that is not a bare array (`{"invoices": […]}`)."""
    root, value = _decode(body, "json")
    if root is not None and root not in (many, single):
        raise DecodeError(f"expected a {many!r} list, got {root!r}")
    if value == "":
        return []
    if isinstance(value, dict):
        # One key holding the member(s), as Rails repeats them without an array.
        if len(value) != 1:
            raise DecodeError(f"expected a {many!r} list, got an object")
        (inner,) = value.values()
        value = inner if isinstance(inner, list) else [inner]
    if not isinstance(value, list):
        raise DecodeError(f"expected a {many!r} list, got {type(value).__name__}")
    return [unwrap_member(m, single) for m in value]


#: A list reply may hold at most this many members, plus one per `BYTES_PER_MEMBER` bytes
#: of body: what it can make us build is bound by its size (an invoice the service sends
#: is 2-4 KB; 9.9 million empty members in 29 KB of gzip would be 7 GB of models).
MIN_MEMBER_LIMIT = 1_000
BYTES_PER_MEMBER = 256


def member_limit(body: bytes) -> int:
    """The most members (models) a list reply of this size may make us build."""
    return MIN_MEMBER_LIMIT + len(body) // BYTES_PER_MEMBER


def each_member(
    body: bytes, fmt: Format, single: str, many: str, on_member: Callable[[Any], None]
) -> None:
    """Hand every member of a list document to `on_member`, in order; a reply of more
    than `member_limit` members is refused when the first one too many is met."""
    limit = member_limit(body)
    count = 0
    take = on_member

    def counted(member: Any) -> None:
        nonlocal count
        count += 1
        if count > limit:
            raise DecodeError(
                f"a list reply of more than {limit:,} members, the most {len(body):,} bytes "
                f"may hold ({MIN_MEMBER_LIMIT:,} and one per {BYTES_PER_MEMBER} bytes)"
            )
        take(member)

    if fmt == "json" and body.lstrip(b" \t\n\r")[:1] == b"[":
        # Split in C, then each member read on its own: the decoding thread lets the
        # event loop's thread in between, and no tree of the whole list exists.
        for raw in iter_members(body):
            counted(unwrap_member(decode_json(raw), single))
        return
    if fmt == "xml":
        decode_xml_members(
            body, lambda m: counted({} if m == "" else m), list_root_check(single, many)
        )
        return
    for member in _members(body, single, many):
        counted(member)


def list_root_check(single: str, many: str) -> Callable[[str], None]:
    """The check of an XML list's root name: `many`; one `single`, or anything else, is
    refused (`DecodeError`)."""

    def check(name: str) -> None:
        root = snake_name(name)
        if root == single:
            raise DecodeError(f"expected a {many!r} list, got one {single!r}")
        if root != many:
            raise DecodeError(f"expected a {many!r} list, got {root!r}")

    return check


def unwrap_member(member: Any, single: str) -> Any:
    root, inner = unwrap_root(member)
    if root is None or root == single:
        return inner
    if isinstance(inner, dict):
        raise DecodeError(f"expected {single!r} members, got {root!r}")
    return member  # a bare member of one attribute holding a list (`{"details": […]}`)


def load_list(body: bytes, fmt: Format, cls: type[M]) -> list[M]:
    """A list document (`<invoices type="array">` or `[{"invoice": …}, …]`) as models."""
    models: list[M] = []
    each_model_batch(body, fmt, cls, member_limit(body), models.extend)
    return models


def each_model_batch(
    body: bytes, fmt: Format, cls: type[M], chunk: int, emit: Callable[[list[M]], None]
) -> None:
    """`load_list` handed on `chunk` models at a time (for `invoices.iter()`): the models
    of the whole list never exist at once."""
    batch: list[M] = []

    def add(member: Any) -> None:
        nonlocal batch
        batch.append(structure(member, cls))
        if len(batch) >= chunk:
            full, batch = batch, []
            emit(full)

    single, many = ROOTS[cls]
    each_member(body, fmt, single, many, add)
    if batch:
        emit(batch)


@attrs.frozen
class MemberError:
    """A list member that could not be read: its id (None when unreadable) and why."""

    ident: int | None
    error: str


def member_id(member: Any) -> int | None:
    if not isinstance(member, dict):
        return None
    raw = member.get("id")
    try:
        return _as_int(raw, "id") if raw is not None else None
    except DecodeError:
        return None


def load_sync_revisions(body: bytes, fmt: Format) -> SyncRevisions:
    """The sync list as a compact {id: revision} (the highest if an id is listed twice).

    Read into two integer arrays, so a list of a million invoices never exists as a
    million objects: the usual shape in C, any other a member at a time, each judged as
    it is read.
    """
    usual = read_xml_sync_pairs(body) if fmt == "xml" else read_json_sync_pairs(body)
    if usual is not None:  # the shape the service writes, read in C
        return SyncRevisions.from_arrays(*usual)
    revisions = SyncRevisions()
    if fmt == "xml":
        root = decode_xml_members(body, lambda member: revisions.add(*_sync_member(member)))
        if snake_name(root) not in ("invoices", "invoice"):
            raise DecodeError(f"expected a 'invoices' list, got {root!r}")
        return revisions
    for member in _members(body, "invoice", "invoices"):
        revisions.add(*_sync_member(member))
    return revisions


def _sync_member(member: Any) -> tuple[int, int]:
    if not isinstance(member, dict):
        raise DecodeError("sync list member is not an object")
    try:
        ident, revision = member["id"], member["revision"]
    except KeyError as exc:
        raise DecodeError(f"sync list member without {exc.args[0]!r}") from None
    ident = _as_int(ident, "id")
    if ident < 0:
        raise DecodeError(f"sync list id is negative: {ident}")
    return ident, _as_int(revision, "revision")


def _as_int(value: Any, name: str) -> int:
    try:
        if type(value) is int:
            return check_int_range(value)
        if isinstance(value, str):
            return parse_int(value)
    except DecodeError as exc:
        raise DecodeError(f"sync list {name}: {exc}") from None
    raise DecodeError(f"sync list {name} is not an integer: {str(value)[:40]!r}")


def load_field_errors(body: bytes, fmt: Format) -> list[FieldError]:
    """The errors document of a 422, in any of the shapes the service used.

    XML `<errors><error><attribute/><message/></error></errors>` or
    `<errors><error>text</error></errors>`; JSON `[[attribute, message], …]`,
    `{attribute: [messages]}`, either wrapped in `{"errors": …}`. An unreadable body
    gives an empty list: the status alone still says what happened.
    """
    try:
        if fmt == "xml":
            _root, value = decode_xml(body)
        else:
            value = decode_json(body)
            root, inner = unwrap_root(value)
            if root in ("errors", "error"):
                value = inner
    except DecodeError:
        return []
    return _field_errors(value)


def _field_errors(value: Any) -> list[FieldError]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        return [FieldError(attribute=None, message=value)]
    if isinstance(value, list):
        out: list[FieldError] = []
        for item in value:
            if (
                isinstance(item, list)
                and len(item) == 2
                and all(isinstance(x, str) or x is None for x in item)
            ):
                out.append(FieldError(attribute=item[0] or None, message=str(item[1])))
            else:
                out.extend(_field_errors(item))
        return out
    if isinstance(value, dict):
        if "message" in value:
            attribute = value.get("attribute")
            return [
                FieldError(
                    attribute=str(attribute) if attribute not in (None, "") else None,
                    message=str(value["message"]),
                )
            ]
        out = []
        for key, messages in value.items():
            if key in ("error", "errors"):
                out.extend(_field_errors(messages))
                continue
            msgs = messages if isinstance(messages, list) else [messages]
            out.extend(FieldError(attribute=key, message=str(m)) for m in msgs)
        return out
    return [FieldError(attribute=None, message=str(value))]
