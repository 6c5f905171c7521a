"""The name table: how each attribute of a model travels (its names per format and
mode, its item model), read from the attrs fields once. It knows no model class, so
the converter, the writers and the strict structs read it without importing each other.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

import attrs

from invoicing_async._models.base import READ_ONLY, REQUEST_NAME, WIRE_NAME, Model

__all__ = ["FieldSpec", "Format", "field_specs", "read_keys", "snake_name", "wire_key"]

Format = Literal["xml", "json"]


def wire_key(name: str, fmt: Format) -> str:
    """`total_price` -> `total-price` in XML; `_destroy` keeps its leading underscore."""
    if fmt == "json" or "_" not in name:
        return name
    if name.startswith("_"):
        return "_" + name[1:].replace("_", "-")
    return name.replace("_", "-")


def snake_name(name: str) -> str:
    """A name as received (`total-price` or `total_price`) in the snake_case of `ROOTS`."""
    return name.replace("-", "_")


@attrs.frozen
class FieldSpec:
    """How one attribute travels: its names per mode, and its item model."""

    name: str
    wire: str  # snake_case name in documents
    request: str  # snake_case name in request bodies
    read_only: bool
    base_type: Any
    item_model: type[Model] | None  # set for list[Model] collections


def read_keys(spec: FieldSpec) -> frozenset[str]:
    """Every key a document may hold this attribute under: its names in each mode, with
    underscores or hyphens (the converter reads them all)."""
    names = {spec.name, spec.wire, spec.request}
    return frozenset(names | {wire_key(name, "xml") for name in names})


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
            )
        )
    _SPECS[cls] = result = tuple(specs)
    return result
