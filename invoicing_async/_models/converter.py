"""The one cattrs converter: wire trees <-> attrs models.

Structuring accepts a dict from either wire codec: keys underscored or hyphenated,
scalars already typed (XML `type` attributes) or still strings/numbers (JSON). Unknown
keys land in `extra`. Unstructuring (`to_wire`) writes the names of one format and
leaves read-only attributes out of request bodies.
"""

from __future__ import annotations

import datetime as dt
import types
import typing
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Literal, TypeVar

import attrs
import cattrs

from invoicing_async._models.base import READ_ONLY, REQUEST_NAME, WIRE_NAME, Model
from invoicing_async._wire.scalars import (
    parse_bool,
    parse_date,
    parse_datetime,
    parse_decimal,
    parse_int,
)
from invoicing_async.errors import DecodeError

__all__ = [
    "Mode",
    "Style",
    "changes_to_wire",
    "converter",
    "structure",
    "to_dict",
    "to_wire",
    "wire_key",
]

Style = Literal["xml", "json"]
Mode = Literal["request", "document"]
M = TypeVar("M", bound=Model)

converter = cattrs.Converter()


# -- scalar hooks: accept what either format sends, never go through float --------------


def _decimal(value: Any, _: Any) -> Decimal | None:
    cls = value.__class__
    if cls is Decimal:
        return typing.cast(Decimal, value)
    if cls is str:
        return parse_decimal(value) if value.strip() else None
    if cls is int:
        return Decimal(value)
    if cls is float:
        # Only reachable for a caller-built tree; repr gives the shortest exact text.
        return parse_decimal(repr(value))
    raise DecodeError(f"expected a decimal number, got {_kind(value)}")


def _int(value: Any, _: Any) -> int | None:
    cls = value.__class__
    if cls is int:
        return typing.cast(int, value)
    if cls is str:
        return parse_int(value) if value.strip() else None
    if cls is Decimal and value == value.to_integral_value():
        return int(value)
    raise DecodeError(f"expected an integer, got {_kind(value)}")


def _bool(value: Any, _: Any) -> bool | None:
    cls = value.__class__
    if cls is bool:
        return typing.cast(bool, value)
    if cls is str:
        return parse_bool(value) if value.strip() else None
    if cls is int and value in (0, 1):
        return bool(value)
    raise DecodeError(f"expected a boolean, got {_kind(value)}")


def _str(value: Any, _: Any) -> str:
    cls = value.__class__
    if cls is str:
        return typing.cast(str, value)
    if cls is int or cls is Decimal:
        return str(value)
    raise DecodeError(f"expected text, got {_kind(value)}")


def _date(value: Any, _: Any) -> dt.date | None:
    cls = value.__class__
    if cls is dt.date:
        return typing.cast(dt.date, value)
    if cls is str:
        return parse_date(value) if value.strip() else None
    if cls is dt.datetime:
        return typing.cast(dt.datetime, value).date()
    raise DecodeError(f"expected a date, got {_kind(value)}")


def _datetime(value: Any, _: Any) -> dt.datetime | None:
    cls = value.__class__
    if cls is dt.datetime:
        result = typing.cast(dt.datetime, value)
        return result if result.tzinfo else result.replace(tzinfo=dt.timezone.utc)
    if cls is str:
        return parse_datetime(value) if value.strip() else None
    raise DecodeError(f"expected a datetime, got {_kind(value)}")


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return f"{type(value).__name__} {text[:40]}"


converter.register_structure_hook(Decimal, _decimal)
converter.register_structure_hook(int, _int)
converter.register_structure_hook(bool, _bool)
converter.register_structure_hook(str, _str)
converter.register_structure_hook(dt.date, _date)
converter.register_structure_hook(dt.datetime, _datetime)


# -- field table --------------------------------------------------------------------------


@attrs.frozen
class FieldSpec:
    """How one attribute travels: its names per format and mode, and its item model."""

    name: str
    wire: str  # snake_case name in documents
    request: str  # snake_case name in request bodies
    read_only: bool
    base_type: Any
    item_model: type[Model] | None  # set for list[Model] collections
    is_model: bool


def _strip_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


_SPECS: dict[type[Model], tuple[FieldSpec, ...]] = {}


def field_specs(cls: type[Model]) -> tuple[FieldSpec, ...]:
    """The wire description of each attribute of `cls` except `extra` (computed once)."""
    cached = _SPECS.get(cls)
    if cached is not None:
        return cached
    attrs_cls: Any = cls
    attrs.resolve_types(attrs_cls)
    specs = []
    for f in attrs.fields(attrs_cls):
        if f.name == "extra":
            continue
        base = _strip_optional(f.type)
        item_model = None
        if typing.get_origin(base) is list:
            (item,) = typing.get_args(base)
            item_model = item
        wire = f.metadata.get(WIRE_NAME, f.name)
        specs.append(
            FieldSpec(
                name=f.name,
                wire=wire,
                request=f.metadata.get(REQUEST_NAME, wire),
                read_only=f.metadata.get(READ_ONLY, False),
                base_type=base,
                item_model=item_model,
                is_model=isinstance(base, type) and issubclass(base, Model),
            )
        )
    _SPECS[cls] = result = tuple(specs)
    return result


def wire_key(name: str, style: Style) -> str:
    """`total_price` -> `total-price` in XML; `_destroy` keeps its leading underscore."""
    if style == "json" or "_" not in name:
        return name
    if name.startswith("_"):
        return "_" + name[1:].replace("_", "-")
    return name.replace("_", "-")


# -- structuring ----------------------------------------------------------------------------


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Model)


def _make_model_hook(cls: type[M]) -> Callable[[Any, Any], M]:
    table: dict[str, tuple[str, Callable[[Any, Any], Any], Any, bool]] = {}
    for spec in field_specs(cls):
        if spec.item_model is not None:
            item_hook = converter.get_structure_hook(spec.item_model)
            fn: Callable[[Any, Any], Any] = _make_list_hook(spec.item_model, item_hook)
        else:
            fn = converter.get_structure_hook(spec.base_type)
        entry = (spec.name, fn, spec.base_type, spec.item_model is not None)
        for key in {spec.name, spec.wire, spec.request}:
            table[key] = entry
            table[wire_key(key, "xml")] = entry
    cls_name = cls.__name__

    def structure_model(data: Any, _: Any) -> M:
        if data.__class__ is not dict:
            raise DecodeError(f"{cls_name}: expected an object, got {_kind(data)}")
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] | None = None
        for key, value in data.items():
            entry = table.get(key)
            if entry is None:
                if extra is None:
                    extra = {}
                extra[key.replace("-", "_")] = value
                continue
            name, hook, tp, is_list = entry
            if value.__class__ is tp:
                kwargs[name] = value  # typed by the XML codec already: nothing to convert
                continue
            if value is None:
                if is_list:
                    kwargs[name] = []
                continue
            try:
                kwargs[name] = hook(value, tp)
            except DecodeError as exc:
                raise DecodeError(f"{cls_name}.{name}: {exc}") from None
            except (TypeError, ValueError, AttributeError, ArithmeticError) as exc:
                raise DecodeError(f"{cls_name}.{name}: {exc}") from None
        if extra:
            kwargs["extra"] = extra
        return cls(**kwargs)

    return structure_model


def _make_list_hook(
    item_cls: type[Model], item_hook: Callable[[Any, Any], Any]
) -> Callable[[Any, Any], list[Any]]:
    def structure_list(value: Any, _: Any) -> list[Any]:
        if value.__class__ is not list:
            if value == "":
                return []  # an empty element without type="array"
            raise DecodeError(f"expected a list of {item_cls.__name__}, got {_kind(value)}")
        # An empty member element (`<detail/>`) reads as "": a member without attributes.
        return [item_hook({} if item == "" else item, item_cls) for item in value]

    return structure_list


converter.register_structure_hook_factory(_is_model, _make_model_hook)


def structure(data: Any, cls: type[M]) -> M:
    """A model from a decoded wire tree; any mismatch is a `DecodeError` naming the field."""
    result: M = converter.structure(data, cls)
    return result


# -- unstructuring ------------------------------------------------------------------------


_PLANS: dict[tuple[type[Model], Style, Mode], list[tuple[str, str, bool, bool]]] = {}


def _wire_plan(cls: type[Model], style: Style, mode: Mode) -> list[tuple[str, str, bool, bool]]:
    """(attribute, wire key, sent only when set, is a collection) per attribute, computed once."""
    plan = _PLANS.get((cls, style, mode))
    if plan is None:
        request = mode == "request"
        plan = [
            (
                spec.name,
                wire_key(spec.request if request else spec.wire, style),
                request,
                spec.item_model is not None,
            )
            for spec in field_specs(cls)
            if not (request and spec.read_only)
        ]
        _PLANS[(cls, style, mode)] = plan
    return plan


def to_wire(model: Model, *, style: Style, mode: Mode) -> dict[str, Any]:
    """The attributes of `model` as a wire tree for one format.

    `request`: writable attributes that are set (read-only ones are never sent, nor are
    unset ones or `extra`), collections under their request name (`details_attributes`).
    `document`: every attribute as the service writes it, None included, `extra` too.
    """
    out: dict[str, Any] = {}
    for name, key, only_set, is_list in _wire_plan(type(model), style, mode):
        value = getattr(model, name)
        if is_list:
            if only_set and not value:
                continue
            out[key] = [to_wire(v, style=style, mode=mode) if isinstance(v, Model) else v
                        for v in value]  # fmt: skip
        elif value is not None or not only_set:
            out[key] = value
    if mode == "document":
        extra: dict[str, Any] = getattr(model, "extra", {})
        for key, value in extra.items():
            out.setdefault(wire_key(key, style), value)
    return out


def _value_to_wire(value: Any, style: Style, mode: Mode) -> Any:
    if isinstance(value, Model):
        return to_wire(value, style=style, mode=mode)
    if isinstance(value, list):
        return [_value_to_wire(v, style, mode) for v in value]
    return value


def changes_to_wire(
    cls: type[Model], changes: Mapping[str, Any], *, style: Style
) -> dict[str, Any]:
    """Only the named attributes, for an update. None is sent (as nil) to clear a value.

    Unknown names raise `TypeError` and read-only names `ValueError`, before anything
    is sent: a typo must not silently become a no-op update.
    """
    specs = {s.name: s for s in field_specs(cls)}
    out: dict[str, Any] = {}
    for name, value in changes.items():
        spec = specs.get(name)
        if spec is None:
            raise TypeError(f"{cls.__name__} has no attribute {name!r}")
        if spec.read_only:
            raise ValueError(f"{cls.__name__}.{name} is read-only and cannot be updated")
        out[wire_key(spec.request, style)] = _value_to_wire(value, style, "request")
    return out


def to_dict(model: Model) -> dict[str, Any]:
    """Plain Python values, nested models as dicts; handy for rows and DataFrames."""
    result: dict[str, Any] = converter.unstructure(model)
    return result
