"""Wire names and every body the client (or the fake service) writes: each attribute's
names per format, the Rails root names, the JSON root rule and every request payload.
Resources build no names themselves."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from invoicing_async._models.base import Model
from invoicing_async._models.fields import FieldSpec, Format, field_specs, snake_name, wire_key
from invoicing_async._models.invoice import Invoice, InvoiceDetail, InvoicePayment
from invoicing_async._models.recurring import RecurringTemplate, RecurringTemplateDetail
from invoicing_async._models.session import CurrentSession
from invoicing_async._wire.json import encode_json
from invoicing_async._wire.outgoing import problems
from invoicing_async._wire.xml import PlainList, encode_xml
from invoicing_async.errors import FieldError, InvalidArgumentError, ValidationError

__all__ = [
    "ROOTS",
    "Format",
    "Mode",
    "changes_to_wire",
    "dump_changes",
    "dump_document",
    "dump_filter",
    "dump_model",
    "dump_send",
    "dump_sync_fetch_ids",
    "root_name",
    "to_wire",
    "unwrap_root",
]

Mode = Literal["request", "document"]


# (single root, list root) in snake_case.
ROOTS: dict[type[Model], tuple[str, str]] = {
    Invoice: ("invoice", "invoices"),
    InvoiceDetail: ("detail", "details"),
    InvoicePayment: ("payment", "payments"),
    RecurringTemplate: ("recurring_template", "recurring_templates"),
    RecurringTemplateDetail: ("detail", "details"),
    CurrentSession: ("user", "users"),
}
_ROOT_NAMES = frozenset(name for pair in ROOTS.values() for name in pair)


def root_name(cls: type[Model], fmt: Format, *, plural: bool = False) -> str:
    """The root element (XML) or key (JSON) that wraps a `cls` document."""
    single, many = ROOTS[cls]
    return wire_key(many if plural else single, fmt)


def unwrap_root(value: Any) -> tuple[str | None, Any]:
    """`{"invoice": {…}}` -> `("invoice", {…})`; a bare value -> `(None, value)`. A single-key
    object is a wrapper when it holds an object or a list, or its key is a root name."""
    if isinstance(value, dict) and len(value) == 1:
        ((key, inner),) = value.items()
        root = snake_name(key)
        if isinstance(inner, (dict, list)) or root in _ROOT_NAMES:
            return root, inner
    return None, value


_PLANS: dict[tuple[type[Model], Format, Mode], list[tuple[str, str, bool, bool]]] = {}


def _wire_plan(cls: type[Model], fmt: Format, mode: Mode) -> list[tuple[str, str, bool, bool]]:
    """(attribute, wire key, sent only when set, is a collection) per attribute, computed once."""
    plan = _PLANS.get((cls, fmt, mode))
    if plan is None:
        request = mode == "request"
        plan = [
            (
                spec.name,
                wire_key(spec.request if request else spec.wire, fmt),
                request,
                spec.item_model is not None,
            )
            for spec in field_specs(cls)
            if not (request and spec.read_only)
        ]
        _PLANS[(cls, fmt, mode)] = plan
    return plan


def to_wire(
    model: Model, *, fmt: Format, mode: Mode, setting: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The attributes of `model` as a wire tree for one format: `request`, the set writable
    ones (under request names); `document`, every attribute as the service writes it.
    `setting` gives plain attributes other values, in their place (no copy of the model)."""
    out: dict[str, Any] = {}
    for name, key, only_set, is_list in _wire_plan(type(model), fmt, mode):
        value = getattr(model, name) if setting is None else setting.get(name, getattr(model, name))
        if is_list:
            if only_set and not value:
                continue
            out[key] = [_value_to_wire(v, fmt, mode) for v in value]
        elif value is not None or not only_set:
            out[key] = value
    if mode == "document":
        extra: dict[str, Any] = getattr(model, "extra", {})
        for key, value in extra.items():
            out.setdefault(wire_key(key, fmt), value)
    return out


def _value_to_wire(value: Any, fmt: Format, mode: Mode) -> Any:
    if isinstance(value, Model):
        return to_wire(value, fmt=fmt, mode=mode)
    if isinstance(value, list):
        return [_value_to_wire(v, fmt, mode) for v in value]
    return value


def changes_to_wire(cls: type[Model], changes: Mapping[str, Any], *, fmt: Format) -> dict[str, Any]:
    """Only the named attributes, for an update (None clears a value); unknown and read-only
    names raise `InvalidArgumentError` (a `ValidationError`, `TypeError` and `ValueError`)
    naming each, before anything is sent."""
    specs = {s.name: s for s in field_specs(cls)}
    out: dict[str, Any] = {}
    refused: list[FieldError] = []
    for name, value in changes.items():
        spec = specs.get(name)
        if spec is None or spec.read_only:
            refused.append(_refusal(cls, name, specs))
            continue
        out[wire_key(spec.request, fmt)] = _value_to_wire(value, fmt, "request")
    if refused:
        raise InvalidArgumentError(refused)
    return out


def _refusal(cls: type[Model], name: str, specs: Mapping[str, FieldSpec]) -> FieldError:
    """Why `name` cannot be updated: unknown (with its close matches) or read-only, and
    what may be."""
    writable = sorted(n for n, spec in specs.items() if not spec.read_only)
    if name in specs:
        return FieldError(name, f"{cls.__name__}.{name} is read-only and cannot be updated")
    close = difflib.get_close_matches(name, writable, n=3)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
    return FieldError(
        name,
        f"{cls.__name__} has no attribute {name!r}{hint} (updatable: {', '.join(writable)})",
    )


def _wrapped(root: str, data: Mapping[str, Any] | list[Any], fmt: Format) -> bytes:
    """`data` in `root` (snake_case, spelled here for the format)."""
    if fmt == "xml":
        return encode_xml(wire_key(root, fmt), data)
    return encode_json(root, data)


def _request(root: str, data: Mapping[str, Any], fmt: Format) -> bytes:
    """A request body, refused (`ValidationError`, nothing sent) if a value cannot go."""
    found = [
        FieldError(attribute=path, message=message)
        for path, message in problems(data, xml=fmt == "xml")
    ]
    if found:
        raise ValidationError(found)
    return _wrapped(root, data, fmt)


def dump_model(
    model: Model, fmt: Format, *, mode: Mode = "request", setting: Mapping[str, Any] | None = None
) -> bytes:
    """A create or payment body (or, with `mode="document"`, the service's document);
    `setting`: plain attributes written with these values (a create's idempotency marker)."""
    data = to_wire(model, fmt=fmt, mode=mode, setting=setting)
    if mode == "request":
        return _request(ROOTS[type(model)][0], data, fmt)
    return _wrapped(ROOTS[type(model)][0], data, fmt)


def dump_changes(cls: type[Model], changes: Mapping[str, Any], fmt: Format) -> bytes:
    """An update body naming only `changes` (attribute names), in `cls`'s root."""
    return _request(ROOTS[cls][0], changes_to_wire(cls, changes, fmt=fmt), fmt)


def dump_send(email: str | None, invoice_email: str | None, send_method: str, fmt: Format) -> bytes:
    """The send_invoice / send_reminder body: `<invoice><email/><invoice-email/>…`; an
    address or text given as None is left out (the service then uses its own)."""
    data = {"email": email, "invoice_email": invoice_email, "send_method": str(send_method)}
    return _request("invoice", {wire_key(k, fmt): v for k, v in data.items() if v is not None}, fmt)


def dump_document(document: Mapping[str, Any], fmt: Format) -> bytes:
    """A caller's own body (`client.request`): one root, ``{"contact": {…}}``, written in
    `fmt` (snake_case names work in both: Rails reads `-` as `_`); refused like any body."""
    if len(document) != 1:
        roots = ", ".join(map(repr, document)) or "none"
        raise ValueError(f'a body has one root, as {{"contact": {{...}}}}; got {roots}')
    [(root, data)] = document.items()
    if not isinstance(data, (Mapping, list)):
        raise TypeError(f"the body's root {root!r} holds an object or a list, not {data!r}")
    found = [
        FieldError(attribute=path, message=message)
        for path, message in problems(data, xml=fmt == "xml")
    ]
    if found:
        raise ValidationError(found)
    if fmt == "xml":
        return encode_xml(root, data)
    return encode_json(root, data)


def dump_filter(parameters: Mapping[str, Any], fmt: Format, *, root: str = "filter") -> bytes:
    """Advanced filter parameters, sent as given (the specification does not list them)."""
    return _request(root, dict(parameters), fmt)


def dump_sync_fetch_ids(ids: Sequence[int], fmt: Format) -> bytes:
    """`<invoices><ids><id>1</id><id>2</id></ids></invoices>`: one `ids` element."""
    if fmt == "xml":
        return _wrapped("invoices", {"ids": PlainList("id", [str(i) for i in ids])}, fmt)
    return _wrapped("invoices", {"ids": list(ids)}, fmt)
