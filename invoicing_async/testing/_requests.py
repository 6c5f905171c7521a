"""Reading request bodies as Rails did: `-` and `_` alike, only `type="array"` is a list,
unknown and read-only attributes ignored (strong parameters)."""

from __future__ import annotations

from typing import Any, TypeVar

from invoicing_async._models.converter import structure
from invoicing_async._models.fields import FieldSpec, Format, field_specs, wire_key
from invoicing_async._wire.json import decode_json
from invoicing_async._wire.xml import decode_xml
from invoicing_async.errors import DecodeError, FieldError
from invoicing_async.models import Model
from invoicing_async.testing._rules import Unprocessable

__all__ = ["parse_body", "parse_changes", "parse_model", "parse_sync_ids"]

M = TypeVar("M", bound=Model)


def parse_body(body: bytes, fmt: Format, root: str) -> dict[str, Any]:
    """The attributes under `root` (`<invoice>` / `{"invoice": …}`); 422 when absent."""
    try:
        if fmt == "xml":
            name, value = decode_xml(body)
            name = name.replace("-", "_")
        else:
            document = decode_json(body)
            if not isinstance(document, dict) or len(document) != 1:
                raise Unprocessable([FieldError(root, f"expected a {root!r} object")])
            ((name, value),) = document.items()
            name = name.replace("-", "_")
    except DecodeError as exc:
        raise Unprocessable([FieldError(None, f"unreadable body: {exc}")]) from None
    if name != root or not isinstance(value, dict):
        raise Unprocessable([FieldError(root, f"expected a {root!r} element, got {name!r}")])
    return value


def parse_changes(raw: dict[str, Any], cls: type[Model]) -> dict[str, Any]:
    """Writable attributes present in `raw`, typed, by attribute name (collections as lists
    of such dicts)."""
    lookup: dict[str, FieldSpec] = {}
    for spec in field_specs(cls):
        for key in {spec.name, spec.wire, spec.request}:
            lookup[key] = spec
            lookup[wire_key(key, "xml")] = spec
    out: dict[str, Any] = {}
    for key, value in raw.items():
        found = lookup.get(key)
        if found is None or found.read_only:
            continue  # unknown or read-only: ignored, as Rails' strong parameters do
        spec = found
        if spec.item_model is not None:
            if value is None or value == "":
                out[spec.name] = []
                continue
            if not isinstance(value, list):
                raise Unprocessable([FieldError(spec.name, 'must be a list (type="array")')])
            out[spec.name] = [
                parse_changes(_as_dict(item, spec.name), spec.item_model) for item in value
            ]
            continue
        try:
            out[spec.name] = (
                None if value is None else getattr(structure({key: value}, cls), spec.name)
            )
        except DecodeError as exc:
            raise Unprocessable([FieldError(spec.name, str(exc))]) from None
    return out


def _as_dict(item: Any, name: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise Unprocessable([FieldError(name, "each member must be an element with attributes")])
    return item


def parse_model(raw: dict[str, Any], cls: type[M]) -> M:
    """A new entity from a create body; read-only and unknown attributes are dropped."""
    changes = parse_changes(raw, cls)
    for spec in field_specs(cls):
        if spec.item_model is not None and spec.name in changes:
            changes[spec.name] = [spec.item_model(**item) for item in changes[spec.name]]
    return cls(**changes)


def parse_sync_ids(body: bytes, fmt: Format) -> list[int]:
    """`<invoices><ids><id>1</id>…</ids></invoices>`; several `ids` elements are an error."""
    raw = parse_body(body, fmt, "invoices")
    ids = raw.get("ids")
    if isinstance(ids, list) and fmt == "xml":
        raise Unprocessable([FieldError("ids", "give one ids element with id children")])
    if fmt == "xml":
        if not isinstance(ids, dict):
            return []
        ids = ids.get("id", [])
    if not isinstance(ids, list):
        ids = [ids]
    try:
        return [int(i) for i in ids]
    except (TypeError, ValueError):
        raise Unprocessable([FieldError("ids", "must be integers")]) from None
