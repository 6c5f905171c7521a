"""The models as msgspec structs, generated from their fields: a JSON member that fits
them is one the converter reads too, checked in C without building a model.

Each struct accepts less than the converter: only the types the service sends
(integers, amounts as plain decimal text or integers, RFC 3339 dates and times, lists
of objects), and null for every other name the converter reads an attribute under, so
a hyphenated or request-named duplicate never slips past. Fields the models do not
know are left alone here: `decode_member` has already parsed them, bounded, as
`decode_json` would, and the converter keeps any value in `extra`. A member that does
not fit is no error: the converter reads it and decides.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from decimal import Decimal
from typing import Annotated, Any, TypeVar

import attrs
import msgspec

from invoicing_async._models.base import Model
from invoicing_async._models.converter import (
    check_plain,
    datetime_text,
    decimal_text,
    structure,
)
from invoicing_async._models.invoice import Invoice
from invoicing_async._models.payloads import ROOTS, field_specs, read_keys, snake_name
from invoicing_async._wire.json import MEMBER_REFUSALS, decode_member
from invoicing_async._wire.scalars import INT64_MAX, INT64_MIN, MAX_DEPTH
from invoicing_async.errors import DecodeError

__all__ = [
    "Columns",
    "checked_invoice",
    "invoice_columns",
    "load_closed",
    "member_tree",
    "struct_for",
    "structure_member",
]

M = TypeVar("M", bound=Model)

_Int64 = Annotated[int, msgspec.Meta(ge=INT64_MIN, le=INT64_MAX)]
# Plain decimal text: at most 60 digits either side of the point, so within the
# converter's bounds on length (200) and exponent (±100) whatever the digits are.
_DecimalText = Annotated[str, msgspec.Meta(pattern=r"^-?[0-9]{1,60}(\.[0-9]{1,60})?$")]
_SCALARS: dict[Any, Any] = {
    str: str,
    int: _Int64,
    bool: bool,
    Decimal: _DecimalText | _Int64,
    dt.date: dt.date,
    dt.datetime: dt.datetime,
}

_STRUCTS: dict[tuple[type[Model], bool], type[msgspec.Struct]] = {}


def struct_for(cls: type[Model], *, closed: bool = False) -> type[msgspec.Struct]:
    """The strict struct of a model class (generated once, nested models included).

    A `closed` struct takes no field the models do not know (so every `extra` is empty)
    and no list under another of its names, and keeps timestamps and amounts as text
    (parsed by the converter's own functions when built): what it reads
    from JSON is built without the decoded tree (`load_closed`)."""
    found = _STRUCTS.get((cls, closed))
    if found is not None:
        return found
    fields: list[tuple[str, Any, Any]] = []
    for spec in field_specs(cls):
        if spec.item_model is not None:
            tp: Any = list[struct_for(spec.item_model, closed=closed)]  # type: ignore[misc]
        elif closed and spec.base_type in (dt.datetime, Decimal):
            # Text parsed by the converter's own function when built (a C pattern check
            # per amount cost more than the whole build): what it refuses, the converter
            # reads and names.
            tp = str | _Int64 if spec.base_type is Decimal else str
        else:
            tp = _SCALARS[spec.base_type]
        fields.append((spec.name, tp | None, msgspec.field(default=None, name=spec.wire)))
        if closed and spec.item_model is not None:
            continue  # a list under another name: not taken (a null there empties it)
        # The other keys the converter reads this attribute under: null or absent only.
        for number, key in enumerate(sorted(read_keys(spec) - {spec.wire})):
            fields.append(
                (f"{spec.name}__alias{number}", None, msgspec.field(default=None, name=key))
            )
    name = f"{'Closed' if closed else 'Strict'}{cls.__name__}"
    struct = msgspec.defstruct(name, fields, gc=False, frozen=True, forbid_unknown_fields=closed)
    _STRUCTS[cls, closed] = struct
    return struct


#: What a store indexes of an invoice: id, revision, invoice number, state, contact id.
Columns = tuple[int | None, int | None, str | None, str | None, int | None]


def invoice_columns(invoice: Any) -> Columns:
    """The columns of an `Invoice`, or of its strict struct (the same attribute names)."""
    return invoice.id, invoice.revision, invoice.invoice_id, invoice.state, invoice.contact_id


_INVOICE = struct_for(Invoice)


def member_tree(raw: bytes) -> Any:
    """What `decode_json` reads of a text of at most `MAX_DEPTH` brackets in all, parsed
    in C (`decode_member`), or None when it is not sure: deeper text, or a refusal.

    Bounded so, whatever fields the models do not know hold, the converter keeps them
    (`converter.check_plain`) or names them as it does in a `decode_json` tree."""
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        return None
    try:
        return decode_member(raw)
    except MEMBER_REFUSALS:
        return None


def checked_invoice(raw: bytes) -> tuple[Columns, dict[str, Any]] | None:
    """The columns and content of a sync-fetch member `{"invoice": {…}}` that the
    converter is sure to read; None when it is not sure (the caller then lets the
    converter read it). Fields the models do not know pass the struct unread: the
    `member_tree` bound keeps them readable, so whatever is stored reads back."""
    tree = member_tree(raw)
    if tree.__class__ is not dict or len(tree) != 1:
        return None
    inner = tree.get("invoice")
    if inner.__class__ is not dict:
        return None
    try:
        return invoice_columns(msgspec.convert(inner, _INVOICE)), inner
    except msgspec.ValidationError:
        return None


# -- models from checked trees ---------------------------------------------------------------


class _Unsure(Exception):
    """The built model might differ from the converter's: the converter reads it."""


@functools.lru_cache(maxsize=4096)
def _timestamp_text(text: str) -> dt.datetime | None:
    """A timestamp's text as the converter reads it (blank is none); cached as
    `datetime_text` is, so a repeated time costs one C call."""
    return datetime_text(text) if text.strip() else None


@functools.lru_cache(maxsize=4096, typed=True)
def _amount(value: str | int | None) -> Decimal | None:
    """An amount of a closed struct (text, an integer or null) as the converter reads
    it; cached, so a repeated amount costs one C call."""
    if value is None:
        return None
    if value.__class__ is str:
        return decimal_text(value) if value.strip() else None
    return Decimal(value)


def _builder(cls: type[M], *, closed: bool = False) -> Callable[[Any, Any], M]:
    """`build(struct, tree)`: the model of a member its strict struct accepted, as the
    converter builds it, straight-line code per member (the converter's loop looks up
    and branches on every key): the stores of the class's `__init__`, when that is all
    it does, or one call of the class.

    Values come from the struct, typed in C, except timestamps, parsed from their text
    as the converter parses them; fields the models do not know are kept in `extra`,
    checked as the converter checks them (a closed struct has none: no tree is needed).
    cattrs' generated structuring functions read a dict key by key with a hook each: the
    per-field cost this avoids."""
    specs = field_specs(cls)
    names: dict[str, Any] = {
        "cls": cls,
        "Decimal": Decimal,
        "decimal_text": decimal_text,
        "datetime_text": datetime_text,
        "timestamp_text": _timestamp_text,
        "amount": _amount,
    }
    args: list[tuple[str, str]] = []
    known: set[str] = set()
    list_aliases: set[str] = set()
    for spec in specs:
        keys = read_keys(spec)
        known |= keys
        if spec.item_model is not None:
            # A null under another name empties the list in the converter: never here.
            list_aliases |= keys - {spec.wire}
            names[f"_build_{spec.name}"] = _builder(spec.item_model, closed=closed)
            items = (
                f"i, None) for i in s.{spec.name}"
                if closed
                else f"i, t) for i, t in zip(s.{spec.name}, d[{spec.wire!r}])"
            )
            expr = f"[] if s.{spec.name} is None else [_build_{spec.name}({items}]"
        elif spec.base_type is Decimal and closed:  # any text, as the converter reads it
            expr = f"amount(s.{spec.name})"
        elif spec.base_type is Decimal:  # decimal text, or an integer
            value = f"s.{spec.name}"
            expr = (
                f"None if {value} is None else decimal_text({value}) "
                f"if {value}.__class__ is str else Decimal({value})"
            )
        elif spec.base_type is dt.datetime and closed:  # the text, as the converter reads it
            expr = f"None if s.{spec.name} is None else timestamp_text(s.{spec.name})"
        elif spec.base_type is dt.datetime:
            expr = f"None if s.{spec.name} is None else datetime_text(d[{spec.wire!r}])"
        else:
            expr = f"s.{spec.name}"
        args.append((spec.name, expr))
    names["known"] = plain = frozenset(known - list_aliases)
    names["_extra"] = _extra_reader(plain, frozenset(list_aliases))
    args.append(("extra", "{}" if closed else "{} if d.keys() <= known else _extra(d)"))
    if _assigns_only(cls, {name for name, _ in args}):
        # Its __init__ only stores what it is given: the same stores without binding
        # dozens of keyword arguments (most of a build's cost), in the same order.
        names["new"] = object.__new__
        stores = "".join(f"    o.{name} = {expr}\n" for name, expr in args)
        source = f"def build(s, d):\n    o = new(cls)\n{stores}    return o\n"
    else:
        call = ", ".join(f"{name}={expr}" for name, expr in args)
        source = f"def build(s, d):\n    return cls({call})\n"
    exec(compile(source, f"<strict build {cls.__name__}>", "exec"), names)
    build: Callable[[Any, Any], M] = names["build"]
    return build


def _assigns_only(cls: type[Any], given: set[str]) -> bool:
    """Whether `cls(**values)` for exactly the attributes in `given` does nothing but
    store them: every attribute given, none converted, validated or hooked, nothing run
    before or after, no `__new__` or `__setattr__` of its own (a frozen class has one)."""
    if not attrs.has(cls):
        return False
    fields = attrs.fields(cls)
    return (
        {f.name for f in fields} == given
        and all(
            f.init and f.validator is None and f.converter is None and f.alias == f.name
            for f in fields
        )
        and not hasattr(cls, "__attrs_pre_init__")
        and not hasattr(cls, "__attrs_post_init__")
        and cls.__new__ is object.__new__
        and cls.__setattr__ is object.__setattr__
    )


def _extra_reader(
    known: frozenset[str], list_aliases: frozenset[str]
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The fields of a tree the model does not know, as the converter keeps them (a list
    under another of its names is left to the converter)."""

    def extra(tree: dict[str, Any]) -> dict[str, Any]:
        unknown = tree.keys() - known
        kept: dict[str, Any] = {}
        for key, value in tree.items():
            if key in unknown:
                if key in list_aliases:
                    raise _Unsure
                check_plain(value)
                kept[snake_name(key)] = value
        return kept

    return extra


_BUILDERS: dict[tuple[type[Model], bool], Callable[[Any, Any], Any]] = {}


def _build(cls: type[M], closed: bool) -> Callable[[Any, Any], M]:
    build = _BUILDERS.get((cls, closed))
    if build is None:
        build = _BUILDERS[cls, closed] = _builder(cls, closed=closed)
    return build


def structure_member(tree: Any, cls: type[M]) -> M:
    """The model of a JSON object as `decode_member` parsed it (not `decode_json`: its
    text may hold lone surrogates, which the struct does not check), exactly as the
    converter builds it: checked in C against the strict struct and built in one call
    per object; what the check refuses, the converter reads (and names what is wrong)."""
    try:
        model: M = _build(cls, False)(msgspec.convert(tree, struct_for(cls)), tree)
    except (msgspec.ValidationError, DecodeError, _Unsure):
        return structure(tree, cls)
    return model


_DOCUMENTS: dict[type[Model], msgspec.json.Decoder[Any]] = {}


def load_closed(body: bytes, cls: type[M]) -> M | None:
    """The model of a JSON document `{"<root>": {…}}` holding only fields the models
    know, read straight into its closed struct in C and built from it (no tree); None
    when the body is anything else (the caller then reads it the general way)."""
    decoder = _DOCUMENTS.get(cls)
    if decoder is None:
        root = ROOTS[cls][0]
        document = msgspec.defstruct(
            f"Closed{cls.__name__}Document",
            [(root, struct_for(cls, closed=True))],
            forbid_unknown_fields=True,
            gc=False,
        )
        decoder = _DOCUMENTS[cls] = msgspec.json.Decoder(document)
    try:
        checked = decoder.decode(body)
    except (msgspec.DecodeError, ValueError):  # ValidationError included; ValueError: not UTF-8
        return None
    try:
        model: M = _build(cls, True)(getattr(checked, ROOTS[cls][0]), None)
    except DecodeError:
        return None  # a value the converter refuses: it names what is wrong
    return model
