"""Models out of the package: JSON-safe dicts (money as strings) and pandas DataFrames
(money as Arrow decimals).

`json.dumps(model.to_dict())` fails on `Decimal` and `date`, and frameworks that coerce
them (FastAPI) turn money into floats. These forms keep every digit.
"""

from __future__ import annotations

import datetime as dt
import enum
import typing
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import attrs

from invoicing_async._models.base import Model
from invoicing_async._wire.scalars import format_datetime, format_decimal

if TYPE_CHECKING:
    import pandas

__all__ = [
    "MONEY_DECIMAL",
    "RATE_DECIMAL",
    "decimal_type",
    "details_dataframe",
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
    if isinstance(value, Decimal):
        return format_decimal(value)
    if isinstance(value, dt.datetime):
        return format_datetime(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    return value


def _pandas() -> Any:
    try:
        import pandas
        import pyarrow
    except ImportError:
        raise ImportError(
            "DataFrames need pandas and pyarrow: pip install 'invoicing-async[pandas]'"
        ) from None
    return pandas, pyarrow


# Decimal columns as (precision, scale). Amounts come with at most two places (cents);
# four hold the sub-cent unit prices a line may carry, and every sum stays exact. Rates
# (`exchange_rate`, the `discount` percentage) get eight places. A value with more
# places than its column is refused (never rounded).
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


def decimal_type(name: str) -> tuple[int, int]:
    """(precision, scale) of a decimal column: a rate's or money's."""
    return RATE_DECIMAL if name in _RATES else MONEY_DECIMAL


def scalar_columns(cls: type[Any]) -> dict[str, str]:
    """Column name -> kind ("int", "decimal", "date", "datetime", "bool", "str") of the
    scalar attributes of a model class (what frames and the dlt schema are made of)."""
    attrs.resolve_types(cls)
    columns: dict[str, str] = {}
    for field in attrs.fields(cls):
        args = [a for a in typing.get_args(field.type) if a is not type(None)] or [field.type]
        kind = _KINDS.get(args[0]) if len(args) == 1 else None
        if kind is not None:
            columns[field.name] = kind
    return columns


def _frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> pandas.DataFrame:
    pd, pa = _pandas()
    data: dict[str, Any] = {}
    for name, kind in columns.items():
        values = [row.get(name) for row in rows]
        if kind == "decimal":
            # Arrow refuses a value with more places than the scale: nothing is rounded.
            array = pa.array(values, type=pa.decimal128(*decimal_type(name)))
            data[name] = pd.Series(pd.arrays.ArrowExtensionArray(array))
        elif kind == "date":
            array = pa.array(values, type=pa.date32())
            data[name] = pd.Series(pd.arrays.ArrowExtensionArray(array))
        elif kind == "datetime":
            data[name] = pd.to_datetime(pd.Series(values, dtype=object), utc=True)
        else:
            dtype = {"int": "Int64", "bool": "boolean", "str": "string"}[kind]
            data[name] = pd.Series(values, dtype=dtype)
    return pd.DataFrame(data)


def invoices_dataframe(invoices: Iterable[Any]) -> pandas.DataFrame:
    """One row per invoice, one typed column per scalar attribute.

    Money and rates are Arrow decimals (`decimal128(18, 4)`, rates `(18, 8)`): exact, and
    summed in C (`frame.total_price_incl_tax.sum()` is a `Decimal`); dates are Arrow
    `date32`, datetimes UTC-aware; ids and counts nullable `Int64`, flags `boolean`,
    text `string`. `frame.to_parquet()` keeps every digit.
    """
    items = list(invoices)
    if not items:
        from invoicing_async._models.invoice import Invoice

        return _frame([], scalar_columns(Invoice))
    return _frame([attrs.asdict(i, recurse=False) for i in items], scalar_columns(type(items[0])))


def details_dataframe(invoices: Iterable[Any]) -> pandas.DataFrame:
    """One row per line of the given invoices (or templates), with the typed columns of
    `invoices_dataframe`; `invoice_id` links each line to its invoice."""
    from invoicing_async._models.invoice import InvoiceDetail

    rows: list[dict[str, Any]] = []
    for invoice in invoices:
        for line in getattr(invoice, "details", []):
            row = attrs.asdict(line, recurse=False)
            row["invoice_id"] = getattr(invoice, "id", None)
            rows.append(row)
    columns = scalar_columns(InvoiceDetail)
    columns["invoice_id"] = "int"
    return _frame(rows, columns)
