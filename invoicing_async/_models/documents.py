"""Whole documents: bytes of either format <-> models, with the root names Rails uses."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeVar

from invoicing_async._models.base import Model
from invoicing_async._models.converter import Mode, structure, to_wire, wire_key
from invoicing_async._models.invoice import Invoice, InvoiceDetail, InvoicePayment
from invoicing_async._models.recurring import RecurringTemplate, RecurringTemplateDetail
from invoicing_async._models.session import CurrentSession, SyncEntry, SyncRevisions
from invoicing_async._wire.json import decode_json, encode_json
from invoicing_async._wire.xml import PlainList, decode_xml, decode_xml_members, encode_xml
from invoicing_async.errors import DecodeError, FieldError

__all__ = [
    "ROOTS",
    "Format",
    "dump_field_errors",
    "dump_list",
    "dump_model",
    "dump_sync_entries",
    "dump_sync_fetch_ids",
    "load_field_errors",
    "load_list",
    "load_model",
    "load_sync_entries",
    "load_sync_revisions",
    "root_name",
]

Format = Literal["xml", "json"]
M = TypeVar("M", bound=Model)

# (single root, list root) in snake_case.
ROOTS: dict[type[Model], tuple[str, str]] = {
    Invoice: ("invoice", "invoices"),
    InvoiceDetail: ("detail", "details"),
    InvoicePayment: ("payment", "payments"),
    RecurringTemplate: ("recurring_template", "recurring_templates"),
    RecurringTemplateDetail: ("detail", "details"),
    CurrentSession: ("user", "users"),
}


def root_name(cls: type[Model], fmt: Format, *, plural: bool = False) -> str:
    single, many = ROOTS[cls]
    return wire_key(many if plural else single, fmt)


def _norm(name: str) -> str:
    return name.replace("-", "_")


def _decode(body: bytes, fmt: Format) -> tuple[str | None, Any]:
    if fmt == "xml":
        root, value = decode_xml(body)
        return _norm(root), value
    value = decode_json(body)
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        if isinstance(inner, (dict, list)):
            return _norm(key), inner
    return None, value


def load_model(body: bytes, fmt: Format, cls: type[M]) -> M:
    """One model from a response body (`<invoice>…</invoice>` or `{"invoice": {…}}`)."""
    expected = ROOTS[cls][0]
    root, value = _decode(body, fmt)
    if root is not None and root != expected:
        raise DecodeError(f"expected a {expected!r} document, got {root!r}")
    if root is None and not isinstance(value, dict):
        raise DecodeError(f"expected a {expected!r} object, got {type(value).__name__}")
    if value == "":
        value = {}  # <invoice/>: an element without attributes
    return structure(value, cls)


def _members(body: bytes, fmt: Format, single: str, many: str) -> list[Any]:
    root, value = _decode(body, fmt)
    if root is not None and root not in (many, single):
        raise DecodeError(f"expected a {many!r} list, got {root!r}")
    if fmt == "xml" and root == single:
        raise DecodeError(f"expected a {many!r} list, got one {single!r}")
    if value == "":
        return []  # <invoices/> without type="array"
    if isinstance(value, dict):
        # <invoices><invoice>…</invoice></invoices> without type="array": Rails-style
        # repetition. One key holding the member(s).
        if len(value) != 1:
            raise DecodeError(f"expected a {many!r} list, got an object")
        (inner,) = value.values()
        value = inner if isinstance(inner, list) else [inner]
    if not isinstance(value, list):
        raise DecodeError(f"expected a {many!r} list, got {type(value).__name__}")
    if fmt == "json":
        return [_unwrap_member(m, single) for m in value]
    return [{} if m == "" else m for m in value]


def _unwrap_member(member: Any, single: str) -> Any:
    if isinstance(member, dict) and len(member) == 1:
        ((key, inner),) = member.items()
        if _norm(key) == single:
            return inner
        if isinstance(inner, dict):
            raise DecodeError(f"expected {single!r} members, got {key!r}")
    return member


def load_list(body: bytes, fmt: Format, cls: type[M]) -> list[M]:
    """A list document (`<invoices type="array">` or `[{"invoice": …}, …]`) as models."""
    single, many = ROOTS[cls]
    return [structure(m, cls) for m in _members(body, fmt, single, many)]


def load_sync_entries(body: bytes, fmt: Format) -> list[SyncEntry]:
    """The sync list: `<invoices>` of `<invoice>` with `id` and `revision` only."""
    return [SyncEntry(id=i, revision=r) for i, r in load_sync_revisions(body, fmt).items()]


def load_sync_revisions(body: bytes, fmt: Format) -> SyncRevisions:
    """The sync list as a compact {id: revision} (the highest if an id is listed twice).

    Streamed: each member goes into two integer arrays as it is read, so a list of a
    million invoices never exists as a million objects.
    """
    revisions = SyncRevisions()

    def add(member: Any) -> None:
        revisions.add(*_sync_member(member))

    if fmt == "xml":
        root = decode_xml_members(body, add)
        if _norm(root) not in ("invoices", "invoice"):
            raise DecodeError(f"expected a 'invoices' list, got {root!r}")
        return revisions

    def hook(obj: dict[str, Any]) -> Any:
        if "revision" in obj and "id" in obj:
            add(obj)
            return _TAKEN
        if len(obj) == 1 and next(iter(obj.values())) is _TAKEN:
            return _TAKEN  # {"invoice": {…}} whose content is already in the dict
        return obj

    value = decode_json(body, object_hook=hook)
    if isinstance(value, dict) and len(value) == 1:
        value = next(iter(value.values()))  # {"invoices": [...]}
    if not isinstance(value, list):
        raise DecodeError(f"expected a 'invoices' list, got {type(value).__name__}")
    for member in value:
        if member is not _TAKEN:
            _sync_member(_unwrap_member(member, "invoice"))  # raises, naming what is missing
    return revisions


_TAKEN = object()


def _sync_member(member: Any) -> tuple[int, int]:
    if not isinstance(member, dict):
        raise DecodeError("sync list member is not an object")
    try:
        ident, revision = member["id"], member["revision"]
    except KeyError as exc:
        raise DecodeError(f"sync list member without {exc.args[0]!r}") from None
    return _as_int(ident, "id"), _as_int(revision, "revision")


def _as_int(value: Any, name: str) -> int:
    if type(value) is int:
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 40:
        return int(value)
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
    except DecodeError:
        return []
    if isinstance(value, dict) and set(value) <= {"errors", "error"} and value:
        value = next(iter(value.values()))
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


def dump_model(model: Model, fmt: Format, *, mode: Mode = "request") -> bytes:
    """A request body (or, with `mode="document"`, a response body) for one model."""
    root = root_name(type(model), fmt)
    data = to_wire(model, style=fmt, mode=mode)
    return encode_xml(root, data) if fmt == "xml" else encode_json(root, data)


def dump_list(models: Sequence[Model], fmt: Format, cls: type[Model]) -> bytes:
    """A list document as the service writes it (used by the fake service)."""
    single = root_name(cls, fmt)
    items = [to_wire(m, style=fmt, mode="document") for m in models]
    if fmt == "xml":
        return encode_xml(root_name(cls, fmt, plural=True), items)
    return encode_json(None, [{single: item} for item in items])


def dump_sync_entries(entries: Iterable[SyncEntry], fmt: Format) -> bytes:
    items = [{"id": e.id, "revision": e.revision} for e in entries]
    if fmt == "xml":
        return encode_xml("invoices", items)
    return encode_json(None, [{"invoice": item} for item in items])


def dump_sync_fetch_ids(ids: Sequence[int], fmt: Format) -> bytes:
    """`<invoices><ids><id>1</id><id>2</id></ids></invoices>`: one `ids` element."""
    if fmt == "xml":
        return encode_xml("invoices", {"ids": PlainList("id", [str(i) for i in ids])})
    return encode_json("invoices", {"ids": list(ids)})


def dump_field_errors(errors: Sequence[FieldError], fmt: Format) -> bytes:
    """A 422 body in the service's current shape (used by the fake service)."""
    if fmt == "xml":
        members = [{"attribute": e.attribute, "message": e.message} for e in errors]
        return encode_xml("errors", PlainList("error", members))
    return encode_json(None, [[e.attribute, e.message] for e in errors])
