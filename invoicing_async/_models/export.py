"""Models out of the package: JSON-safe dicts (money as strings) and pandas DataFrames.

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

from invoicing_async._extras import install_hint
from invoicing_async._models.base import Model
from invoicing_async._wire.scalars import format_datetime, format_decimal

if TYPE_CHECKING:
    import pandas

__all__ = ["details_dataframe", "invoices_dataframe", "to_jsonable"]


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
    except ImportError:
        raise ImportError(f"DataFrames need pandas; {install_hint('pandas')}") from None
    return pandas


_KINDS: dict[type, str] = {
    bool: "bool",
    int: "int",
    Decimal: "decimal",
    dt.datetime: "datetime",
    dt.date: "date",
    str: "str",
}


def _scalar_columns(cls: type[Any]) -> dict[str, str]:
    """Column name -> kind ("int", "decimal", "date", "datetime", "bool", "str")."""
    attrs.resolve_types(cls)
    columns: dict[str, str] = {}
    for field in attrs.fields(cls):
        args = [a for a in typing.get_args(field.type) if a is not type(None)] or [field.type]
        kind = _KINDS.get(args[0]) if len(args) == 1 else None
        if kind is not None:
            columns[field.name] = kind
    return columns


def _frame(rows: list[dict[str, Any]], columns: dict[str, str]) -> pandas.DataFrame:
    pd = _pandas()
    frame = pd.DataFrame({name: [row.get(name) for row in rows] for name in columns})
    for name, kind in columns.items():
        if kind == "int":
            frame[name] = frame[name].astype("Int64")
        elif kind == "bool":
            frame[name] = frame[name].astype("boolean")
        elif kind == "str":
            frame[name] = frame[name].astype("string")
        elif kind == "date":
            frame[name] = pd.to_datetime(frame[name]).astype("datetime64[s]")
        elif kind == "datetime":
            frame[name] = pd.to_datetime(frame[name], utc=True)
        # "decimal": left as Decimal objects (dtype object), so money stays exact.
    return frame


def invoices_dataframe(invoices: Iterable[Any]) -> pandas.DataFrame:
    """One row per invoice, one typed column per scalar attribute.

    Ids and counts are nullable `Int64`, flags `boolean`, text `string`, dates
    `datetime64`, datetimes UTC-aware; money stays `Decimal` (exact; `object` dtype):
    convert with `.astype(float)` only where rounding is acceptable.
    """
    items = list(invoices)
    if not items:
        from invoicing_async._models.invoice import Invoice

        return _frame([], _scalar_columns(Invoice))
    return _frame([attrs.asdict(i, recurse=False) for i in items], _scalar_columns(type(items[0])))


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
    columns = _scalar_columns(InvoiceDetail)
    columns["invoice_id"] = "int"
    return _frame(rows, columns)
