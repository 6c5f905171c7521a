"""The source's Arrow tables: a model's rows and its child tables (`invoices__details`…),
typed by the column table the frames use (`export.scalar_columns`, `export.arrow_type`),
and the dlt column hints of the same columns; values a column cannot hold are refused."""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
import json
import operator
from collections.abc import Container
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from dlt.common.data_types.typing import TDataType
from dlt.common.schema.typing import TColumnSchema, TTableSchemaColumns

from invoicing_async._models import export, fields
from invoicing_async._models.stored import InvoiceDocument
from invoicing_async._wire import scalars
from invoicing_async.errors import DecodeError
from invoicing_async.models import Invoice, Model

__all__ = ["Refused", "build", "children", "columns", "markers", "tables"]

# A column's kind (`export.scalar_columns`, and `extra` as json) in dlt's schema.
_DLT_TYPES: dict[str, TDataType] = {
    "int": "bigint",
    "bool": "bool",
    "str": "text",
    "date": "date",
    "datetime": "timestamp",
    "decimal": "decimal",
    "json": "json",
}
_DATETIME = export.arrow_type("", "datetime")
# What Python (and so dlt and every reader) can hold of a timestamp in UTC.
_IN_RANGE = [
    pa.scalar(bound.replace(tzinfo=dt.timezone.utc), _DATETIME)
    for bound in (dt.datetime.min, dt.datetime.max)
]


def _kinds(cls: type[Model]) -> dict[str, str]:
    """Column name -> kind of a model's scalar attributes, and `extra` as json."""
    return {**export.scalar_columns(cls), "extra": "json"}


def children(cls: type[Model]) -> dict[str, type[Model]]:
    """A model's lists of models (`details`…), each a child table."""
    return {s.name: s.item_model for s in fields.field_specs(cls) if s.item_model is not None}


def columns(cls: type[Model]) -> TTableSchemaColumns:
    """The dlt columns of a model's scalar attributes, typed, plus `extra` as json."""
    hinted: TTableSchemaColumns = {}
    for name, kind in _kinds(cls).items():
        column: TColumnSchema = {"name": name, "data_type": _DLT_TYPES[kind], "nullable": True}
        if kind == "decimal":
            column["precision"], column["scale"] = export.decimal_type(name)
        elif kind == "datetime":
            column["timezone"] = True
        hinted[name] = column
    return hinted


def _unheld(cls: type[Model], name: str, kind: str, item: Any, value: Any) -> str | None:
    """Why `item`'s value cannot be held by its column as it is (None: it can): a decimal
    with more places than the column (never rounded) or past its precision, a datetime
    out of range in UTC, text that is not UTF-8 (a lone surrogate)."""
    what = f"{cls.__name__} {getattr(item, 'id', None)}: {name}"
    if kind == "decimal" and value is not None:
        why = export.decimal_unheld(_decimal(value), name)
        return None if why is None else f"{what}={value} {why}"
    if isinstance(value, dt.datetime):
        try:
            value.astimezone(dt.timezone.utc)
        except OverflowError:
            return f"{what}={value} is out of range in UTC"
    elif isinstance(value, str | dict):
        try:
            json.dumps(value, default=str, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            return f"{what} is not valid UTF-8 text"
    return None


def _decimal(value: Any) -> Decimal:
    """A decimal column's value (the service's text, an integer or a model's decimal) as a
    `Decimal`, read as the decoders read numbers; text that is none reads as NaN, which
    no column holds."""
    if isinstance(value, Decimal):
        return value
    try:
        return scalars.parse_decimal(str(value))
    except DecodeError:
        return Decimal("NaN")


class Refused(ValueError):
    """Values their columns cannot hold: `args[0]`, {position or id of the item: why}."""


def _array(name: str, kind: str, values: list[Any]) -> pa.Array | None:
    """One typed column (None: an `extra` empty throughout, left to dlt to fill); an
    Arrow error (or `ValueError`) when a value does not fit its column."""
    if kind == "json":
        if not any(values):
            return None
        values = [json.dumps(v, default=str, ensure_ascii=False) if v else None for v in values]
        return pa.array(values, pa.string())
    if kind == "decimal":  # exact: Arrow refuses extra places and too many digits
        try:
            text = pa.array(values, pa.string())  # the service's text
        except pa.ArrowTypeError:  # integers, or a model's decimals
            text = pa.array([None if v is None else str(v) for v in values], pa.string())
        try:
            return pc.cast(text, export.arrow_type(name, kind))
        except pa.ArrowInvalid:  # judged by value, whatever the notation (`0E+100` fits)
            return export.held_decimals(name, [None if v is None else _decimal(v) for v in values])
    array = pa.array(values, export.arrow_type(name, kind))
    if kind == "datetime" and array.null_count < len(array):
        low, high = _IN_RANGE
        if pc.any(pc.or_(pc.less(array, low), pc.greater(array, high))).as_py():
            raise ValueError(f"{name} out of range")
    return array


def _arrays(cls: type[Model], items: list[Any]) -> dict[str, pa.Array]:
    """The typed columns of `items` (models, or the closed strict structs, of `cls`), one
    pass over the items per column; `Refused` names by position the items holding a
    value a column cannot hold."""
    arrays: dict[str, pa.Array] = {}
    refused: dict[int, str] = {}
    for name, kind in _kinds(cls).items():
        if name == "extra":  # a strict struct has none
            values = [getattr(item, name) if type(item) is cls else None for item in items]
        else:
            values = list(map(operator.attrgetter(name), items))
        try:
            if (array := _array(name, kind, values)) is not None:
                arrays[name] = array
        except (pa.ArrowException, ValueError, UnicodeError):
            pairs = zip(items, values, strict=True)
            reasons = [_unheld(cls, name, kind, item, value) for item, value in pairs]
            blamed = {position: why for position, why in enumerate(reasons) if why}
            if not blamed:  # no value to blame: never a column left out
                raise
            refused = {**blamed, **refused}
    if refused:
        raise Refused(refused)
    return arrays


def _table(arrays: dict[str, pa.Array]) -> pa.Table:
    """A table whose `_dlt_id` is NOT NULL, as its column in dlt's schema."""
    schema = pa.schema([pa.field(n, a.type, nullable=n != "_dlt_id") for n, a in arrays.items()])
    return pa.Table.from_arrays(list(arrays.values()), schema=schema)


def markers(ids: list[int], keys: list[str], *, root: bool) -> pa.Table:
    """Marker rows naming invoices in the load (`_load.REAL_ROWS`): of the root table
    (`id`), or of a child table (`_dlt_root_id`, the keys of the invoices' rows)."""
    marked = pa.array([f"-{i}" for i in ids], pa.string())
    if root:
        return _table({"id": pa.array(ids, pa.int64()), "_dlt_id": marked})
    return _table({"_dlt_id": marked, "_dlt_root_id": pa.array(keys, pa.string())})


def build(
    cls: type[Model], name: str, rows: list[tuple[int, str, Any]], replaced: Container[int] = ()
) -> dict[str, pa.Table]:
    """The table `name` of `rows` ((id, `_dlt_id`, values) each) and a child table per
    list of models, `name__details`…; the child rows of the ids `replaced` are replaced
    (marker rows). `Refused` names by id every row holding a value a column of any of
    the tables cannot hold."""
    ids = [i for i, _, _ in rows]
    keys = pa.array([k for _, k, _ in rows], pa.string())
    values = [v for _, _, v in rows]
    refused: dict[int, str] = {}
    built: dict[str, pa.Table] = {}
    try:
        built[name] = _table({**_arrays(cls, values), "_dlt_id": keys})
    except Refused as exc:
        refused = {ids[n]: why for n, why in exc.args[0].items()}
    marked = [(i, k) for i, k, _ in rows if i in replaced]
    for child, item_cls in children(cls).items():
        lists = [getattr(v, child) or () for v in values]
        owners = [n for n, items in enumerate(lists) for _ in items]
        try:
            arrays = _arrays(item_cls, list(itertools.chain.from_iterable(lists)))
        except Refused as exc:
            for n, why in exc.args[0].items():
                refused.setdefault(ids[owners[n]], why)
            continue
        parents = keys.take(pa.array(owners, pa.int64()))
        positions = pa.array([n for items in lists for n in range(len(items))], pa.int64())
        arrays["_dlt_id"] = pc.binary_join_element_wise(
            parents, pc.cast(positions, pa.string()), "."
        )
        arrays |= {"_dlt_parent_id": parents, "_dlt_root_id": parents, "_dlt_list_idx": positions}
        table = _table(arrays)
        if marked:  # the stored rows of an invoice are replaced, even by none
            rows_marked = markers([i for i, _ in marked], [k for _, k in marked], root=False)
            table = pa.concat_tables([table, rows_marked], promote_options="default")
        built[f"{name}__{child}"] = table
    if refused:
        raise Refused(refused)
    return built


def tables(
    documents: list[InvoiceDocument], *, scd2: bool, stored: Container[int] = ()
) -> tuple[dict[str, pa.Table], dict[int, str]]:
    """The `invoices` table and its child tables of fetched invoices, and {id: why} of the
    invoices left out, holding a value a column cannot hold. An invoice's `_dlt_id` is its
    id; with scd2 a hash of its document, the key of a version. The child rows of those
    `stored` are replaced (marker rows)."""
    invoices = [
        (d.id or 0, hashlib.blake2b(d.document, digest_size=16).hexdigest(), d.values())
        if scd2
        else (d.id or 0, str(d.id), d.values())
        for d in documents
    ]
    refused: dict[int, str] = {}
    while True:  # each round leaves out at least one invoice
        try:
            return build(Invoice, "invoices", invoices, [] if scd2 else stored), refused
        except Refused as exc:
            refused.update(exc.args[0])
            invoices = [i for i in invoices if i[0] not in refused]
