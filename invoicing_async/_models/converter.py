"""The one cattrs converter: wire trees -> attrs models, the one way a model is built.

Structuring accepts a dict from either wire codec: keys underscored or hyphenated,
scalars already typed (XML `type` attributes) or still strings/numbers (JSON). Unknown
keys land in `extra`. The names come from the name table, `fields`.
"""

from __future__ import annotations

import datetime as dt
import typing
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

import cattrs

from invoicing_async._models.base import Model
from invoicing_async._models.fields import field_specs, read_keys, snake_name
from invoicing_async._wire.scalars import (
    INT64_MAX,
    INT64_MIN,
    MAX_DEPTH,
    TextCache,
    check_int_range,
    parse_bool,
    parse_date,
    parse_datetime,
    parse_decimal,
    parse_int,
)
from invoicing_async.errors import DecodeError

__all__ = ["check_plain", "converter", "structure"]

M = TypeVar("M", bound=Model)

converter = cattrs.Converter()


# -- scalar hooks: accept what either format sends, never go through float --------------


def _or_none(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse`, with blank text read as None (as every hook reads it)."""
    return lambda text: parse(text) if text.strip() else None


# Amounts, rates and timestamps repeat within a response and across a sync (an invoice's
# lines share its prices and times): parsed once each.
decimal_text = TextCache(_or_none(parse_decimal))
datetime_text = TextCache(_or_none(parse_datetime))
date_text = TextCache(_or_none(parse_date))


def _decimal(value: Any, _: Any) -> Decimal | None:
    cls = value.__class__
    if cls is Decimal:
        return typing.cast(Decimal, value)
    if cls is str:
        return decimal_text[value]  # type: ignore[no-any-return]
    if cls is int:
        return Decimal(value)
    if cls is float:
        # Only reachable for a caller-built tree; repr gives the shortest exact text.
        return parse_decimal(repr(value))
    raise DecodeError(f"expected a decimal number, got {_kind(value)}")


def _int(value: Any, _: Any) -> int | None:
    cls = value.__class__
    if cls is int:
        return check_int_range(typing.cast(int, value))
    if cls is str:
        return parse_int(value) if value.strip() else None
    if cls is Decimal and value == value.to_integral_value():
        return check_int_range(int(value))
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


def text_ok(value: str) -> bool:
    """False for text holding a lone surrogate (JSON's "\\ud800"): no encoding can store it."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_LONE_SURROGATE = (
    "holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which no encoding can store"
)


def _str(value: Any, _: Any) -> str:
    cls = value.__class__
    if cls is str:
        if not text_ok(value):
            raise DecodeError(_LONE_SURROGATE)
        return typing.cast(str, value)
    if cls is int or cls is Decimal:
        return str(value)
    raise DecodeError(f"expected text, got {_kind(value)}")


def _date(value: Any, _: Any) -> dt.date | None:
    cls = value.__class__
    if cls is dt.date:
        return typing.cast(dt.date, value)
    if cls is str:
        return date_text[value]  # type: ignore[no-any-return]
    if cls is dt.datetime:
        return typing.cast(dt.datetime, value).date()
    raise DecodeError(f"expected a date, got {_kind(value)}")


def _datetime(value: Any, _: Any) -> dt.datetime | None:
    cls = value.__class__
    if cls is dt.datetime:
        result = typing.cast(dt.datetime, value)
        return result if result.tzinfo else result.replace(tzinfo=dt.timezone.utc)
    if cls is str:
        return datetime_text[value]  # type: ignore[no-any-return]
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


# -- structuring ----------------------------------------------------------------------------


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Model)


def check_plain(value: Any, depth: int = 1) -> None:
    """A value of a field the models do not know, kept in `extra`: text that any encoding
    can store, nested at most `MAX_DEPTH` levels (what the C check lets through is bound
    by the same limit, so whatever a store keeps, this reads)."""
    cls = value.__class__
    if cls is str:
        if not text_ok(value):
            raise DecodeError(_LONE_SURROGATE)
    elif cls is dict or cls is list:
        if depth > MAX_DEPTH:
            raise DecodeError(f"nested more than {MAX_DEPTH} levels deep")
        if cls is dict:
            for key in value:
                if not (key.isascii() or text_ok(key)):
                    raise DecodeError(_LONE_SURROGATE)
        # Members inline: a call only for a nested collection (a list of small objects,
        # as `tax_components`, is the common case).
        for item in value.values() if cls is dict else value:
            kind = item.__class__
            if kind is str:
                if not (item.isascii() or text_ok(item)):
                    raise DecodeError(_LONE_SURROGATE)
            elif kind is dict or kind is list:
                check_plain(item, depth + 1)


# What a field's value is, so the hot loop takes the common cases without a call.
_OTHER, _TEXT, _INT, _LIST = range(4)
_KINDS = {str: _TEXT, int: _INT}
# JSON sends amounts, dates and times as text: parsed once each, by these caches.
_TEXTS: dict[Any, TextCache] = {
    Decimal: decimal_text,
    dt.datetime: datetime_text,
    dt.date: date_text,
}


#: An unknown field name longer than this is not remembered by a model's table (the
#: service's own names are under 40): the tables then hold at most 256 × 128 characters.
MOST_KEPT_NAME_CHARS = 128


# The hot path of decoding: one closure per model class over a precomputed table; split
# into more calls it would cost a call per field of every invoice.
def _make_model_hook(cls: type[M]) -> Callable[[Any, Any], M]:  # noqa: C901
    # A known name's (attribute, hook, type, kind, text cache); an unknown one's name in
    # `extra` (a str: checked once, snake_cased once).
    table: dict[str, Any] = {}
    for spec in field_specs(cls):
        if spec.item_model is not None:
            item_hook = converter.get_structure_hook(spec.item_model)
            fn: Callable[[Any, Any], Any] = _make_list_hook(spec.item_model, item_hook)
            kind = _LIST
        else:
            fn = converter.get_structure_hook(spec.base_type)
            kind = _KINDS.get(spec.base_type, _OTHER)
        entry = (spec.name, fn, spec.base_type, kind, _TEXTS.get(spec.base_type))
        for key in read_keys(spec):
            table[key] = entry
    cls_name = cls.__name__
    # The table's growth by names the models do not know: in count and, as a name sent
    # once may be a megabyte long, in length (a longer name is looked at on every answer).
    most_names = len(table) + 256

    def structure_model(data: Any, _: Any) -> M:  # noqa: C901 - one loop, kept flat for speed
        if data.__class__ is not dict:
            raise DecodeError(f"{cls_name}: expected an object, got {_kind(data)}")
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] | None = None
        for key, value in data.items():
            try:
                entry = table[key]  # a subscript, not a `get` call: once per field
            except KeyError:
                if not text_ok(key):  # a field name no store can keep either
                    raise DecodeError(f"{cls_name}: a field name {_LONE_SURROGATE}") from None
                entry = snake_name(key)
                # A name sent again is then found as unknown.
                if len(table) < most_names and len(key) <= MOST_KEPT_NAME_CHARS:
                    table[key] = entry
            if entry.__class__ is str:  # a field the model does not know: kept in `extra`
                if extra is None:
                    extra = {}
                # Scalars checked here (most extra fields are), collections by `check_plain`.
                kind_of_value = value.__class__
                if kind_of_value is str:
                    if not (value.isascii() or text_ok(value)):
                        raise DecodeError(f"{cls_name}.{entry}: {_LONE_SURROGATE}")
                elif kind_of_value is dict or kind_of_value is list:
                    try:
                        check_plain(value)
                    except DecodeError as exc:
                        raise DecodeError(f"{cls_name}.{entry}: {exc}") from None
                extra[entry] = value
                continue
            if value is None:
                continue  # None, or for a collection its default: empty
            name, hook, tp, kind, parse = entry
            # Already typed (XML's codec types values; JSON's ints and text): checked only.
            if value.__class__ is tp:
                if kind == _TEXT:
                    if value.isascii() or text_ok(value):
                        kwargs[name] = value
                        continue
                elif kind == _INT:
                    if INT64_MIN <= value <= INT64_MAX:
                        kwargs[name] = value
                        continue
                else:
                    kwargs[name] = value
                    continue
            elif parse is not None and value.__class__ is str:
                try:
                    kwargs[name] = parse[value]
                    continue
                except DecodeError:
                    pass  # `hook` says what is wrong, named below
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
        if "" in value:  # an empty member element (`<detail/>`): a member without attributes
            value = [{} if item == "" else item for item in value]
        return [item_hook(item, item_cls) for item in value]

    return structure_list


converter.register_structure_hook_factory(_is_model, _make_model_hook)


def structure(data: Any, cls: type[M]) -> M:
    """A model from a decoded wire tree; any mismatch is a `DecodeError` naming the field."""
    result: M = converter.structure(data, cls)
    return result
