"""Models out of the package: JSON-safe dicts (money as strings) and pandas DataFrames
(money as Arrow decimals), keeping every digit; the column table (which attributes, of
what kind and Arrow type) that the frames and the dlt source's Arrow tables share."""

from __future__ import annotations

import datetime as dt
import enum
import typing
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._extras import install_hint
from invoicing_async._models.base import Model
from invoicing_async._wire.json import json_text

if TYPE_CHECKING:
    import pandas
    import pyarrow

__all__ = [
    "MONEY_DECIMAL",
    "RATE_DECIMAL",
    "arrow_type",
    "dataframes",
    "decimal_type",
    "decimal_unheld",
    "details_dataframe",
    "held_decimals",
    "invoices_dataframe",
    "scalar_columns",
    "to_jsonable",
]


def to_jsonable(value: Any) -> Any:
    """A model (or a tree of values) as JSON-safe Python: money and rates as exact strings
    (`"60.50"`), dates and datetimes as ISO 8601 text, enums as their values."""
    if isinstance(value, Model):
        value = value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, (Decimal, dt.date)):  # datetimes included
        return json_text(value)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    return value


def _pandas() -> Any:
    try:
        import pandas
        import pyarrow
    except ImportError:
        raise ImportError(f"DataFrames need pandas and pyarrow; {install_hint('pandas')}") from None
    return pandas, pyarrow


# Decimal columns as (precision, scale): four places hold sub-cent unit prices, eight the
# rates; a value with more places is refused, never rounded.
MONEY_DECIMAL = (18, 4)
RATE_DECIMAL = (18, 8)
_RATES = frozenset({"exchange_rate", "discount"})

_KINDS: dict[type, str] = {
    bool: "bool",
    int: "int",
    Decimal: "decimal",
    dt.datetime: "datetime",
    dt.date: "date",
    str: "str",
}
# Attributes that are request flags, never data: no table has their column.
_REQUEST_ONLY = frozenset({"destroy"})  # `_destroy` on a line


def decimal_type(name: str) -> tuple[int, int]:
    """(precision, scale) of a decimal column: a rate's or money's."""
    return RATE_DECIMAL if name in _RATES else MONEY_DECIMAL


def decimal_unheld(value: Decimal, name: str) -> str | None:
    """Why the column `name` cannot hold `value` exactly (None: it can), judged by value
    whatever its notation (`1E+60`, `0012.50`, `+12`, `0E+100`): more places than its
    scale (never rounded), or more integer digits than its precision leaves."""
    precision, scale = decimal_type(name)
    if not value.is_finite():
        return "is not a finite number"
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)  # a finite value's
    significant = len("".join(map(str, digits)).rstrip("0"))
    if not significant:
        return None  # zero, in any notation
    if -(exponent + len(digits) - significant) > scale:
        return f"has more than {scale} decimal places"
    if value.adjusted() >= precision - scale:
        return f"exceeds DECIMAL({precision},{scale})"
    return None


def held_decimals(name: str, values: list[Decimal | None]) -> Any:
    """The Arrow decimal array of the column `name` holding `values` exactly, whatever
    their notation (Arrow alone refuses `0E+100`); `pyarrow.ArrowInvalid` (a `ValueError`)
    naming the first value it cannot hold."""
    import pyarrow as pa

    kind = arrow_type(name, "decimal")
    try:
        return pa.array(values, type=kind)
    except pa.ArrowInvalid:
        pass
    quantum = Decimal(1).scaleb(-kind.scale)
    for value in values:
        if value is not None and (why := decimal_unheld(value, name)) is not None:
            raise pa.ArrowInvalid(f"{name}={value} {why}")
    return pa.array([None if v is None else v.quantize(quantum) for v in values], type=kind)


def scalar_columns(cls: type[Any]) -> dict[str, str]:
    """Column name -> kind ("int", "decimal", "date", "datetime", "bool", "str") of the
    scalar attributes of a model class, request flags left out: the one column table
    that frames and the dlt source's tables are made of."""
    attrs.resolve_types(cls)
    columns: dict[str, str] = {}
    for field in attrs.fields(cls):
        args = [a for a in typing.get_args(field.type) if a is not type(None)] or [field.type]
        kind = _KINDS.get(args[0]) if len(args) == 1 else None
        if kind is not None and field.name not in _REQUEST_ONLY:
            columns[field.name] = kind
    return columns


def arrow_type(name: str, kind: str) -> pyarrow.DataType:
    """The Arrow type of the column `name` of kind `kind` (`scalar_columns`): decimals by
    `decimal_type`, datetimes in UTC to the microsecond, as Python holds them."""
    import pyarrow as pa

    if kind == "decimal":
        return pa.decimal128(*decimal_type(name))
    types = {
        "int": pa.int64(),
        "bool": pa.bool_(),
        "str": pa.string(),
        "date": pa.date32(),
        "datetime": pa.timestamp("us", tz="UTC"),
    }
    return types[kind]


def _frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> pandas.DataFrame:
    pd, pa = _pandas()
    data: dict[str, Any] = {}
    for name, kind in columns.items():
        values = [row.get(name) for row in rows]
        if kind == "decimal":
            # Documents hold amounts as text or integers. Arrow refuses a value with more
            # places than the scale: nothing is rounded.
            exact = [v if v is None or isinstance(v, Decimal) else Decimal(v) for v in values]
            array = held_decimals(name, exact)
            data[name] = pd.Series(pd.arrays.ArrowExtensionArray(array))
        elif kind == "date":
            array = pa.array(values, type=arrow_type(name, kind))
            data[name] = pd.Series(pd.arrays.ArrowExtensionArray(array))
        elif kind == "datetime":
            data[name] = pd.to_datetime(pd.Series(values, dtype=object), utc=True)
        else:
            dtype = {"int": "Int64", "bool": "boolean", "str": "string"}[kind]
            data[name] = pd.Series(values, dtype=dtype)
    return pd.DataFrame(data)


def _values(item: Any) -> dict[str, Any]:
    """The attributes of a model or a strict struct, by name (lists left as they are)."""
    if attrs.has(type(item)):
        return attrs.asdict(item, recurse=False)
    return {name: getattr(item, name) for name in item.__struct_fields__}


def _rows(items: Iterable[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], type[Any]]:
    """Invoice rows and line rows (with `invoice_id`) of models or stored JSON documents, and
    the class whose columns the invoice rows have."""
    from invoicing_async._models.documents import load_model
    from invoicing_async._models.invoice import Invoice
    from invoicing_async._models.strict_json import strict_invoice

    cls: type[Any] = Invoice
    invoices: list[dict[str, Any]] = []
    lines: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, (bytes, bytearray, memoryview)):
            document = bytes(item)
            item = strict_invoice(document) or load_model(document, "json", Invoice)
        else:
            cls = type(item)
        row = _values(item)
        invoices.append(row)
        for line in row.get("details") or ():
            line_row = _values(line)
            line_row["invoice_id"] = row.get("id")
            lines.append(line_row)
    return invoices, lines, cls


def _line_columns() -> dict[str, str]:
    from invoicing_async._models.invoice import InvoiceDetail

    return {**scalar_columns(InvoiceDetail), "invoice_id": "int"}


def invoices_dataframe(invoices: Iterable[Any]) -> pandas.DataFrame:
    """One row per invoice, one typed column per scalar attribute.

    `invoices` are models (invoices or templates) or stored JSON documents
    (`{"invoice": {…}}` bytes, as `SQLiteStore` keeps them). Money and rates are Arrow
    decimals (`decimal128(18, 4)`, rates `(18, 8)`): exact, and summed in C
    (`frame.total_price_incl_tax.sum()` is a `Decimal`); dates are Arrow `date32`,
    datetimes UTC-aware; ids and counts nullable `Int64`, flags `boolean`, text
    `string`. `frame.to_parquet()` keeps every digit.
    """
    rows, _, cls = _rows(invoices)
    return _frame(rows, scalar_columns(cls))


def details_dataframe(invoices: Iterable[Any]) -> pandas.DataFrame:
    """One row per line of the given invoices (models or documents, as for
    `invoices_dataframe`), typed alike; `invoice_id` links each line to its invoice."""
    _, lines, _ = _rows(invoices)
    return _frame(lines, _line_columns())


def dataframes(invoices: Iterable[Any]) -> tuple[pandas.DataFrame, pandas.DataFrame]:
    """`invoices_dataframe` and `details_dataframe` of the same invoices, read once."""
    rows, lines, cls = _rows(invoices)
    return _frame(rows, scalar_columns(cls)), _frame(lines, _line_columns())
