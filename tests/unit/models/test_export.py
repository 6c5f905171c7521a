"""Models out of the package: JSON-safe dicts and typed pandas DataFrames."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pandas as pd

from invoicing_async import models as m
from invoicing_async.contrib.pandas import details_dataframe, invoices_dataframe

CEST = dt.timezone(dt.timedelta(hours=2))


def invoice(ident: int, paid: str, **kwargs: object) -> m.Invoice:
    return m.Invoice(
        id=ident,
        revision=1406734421,
        state=m.InvoiceState.OPEN,
        total_paid=Decimal(paid),
        discount=Decimal("17.5"),
        invoice_date=dt.date(2014, 7, 30),
        created_at=dt.datetime(2014, 7, 30, 17, 33, 41, tzinfo=CEST),
        prices_are_incl_tax=False,
        details=[
            m.InvoiceDetail(
                id=ident * 10, description="Work", price=Decimal("60.50"), tax_rate_id=1
            ),
            m.InvoiceDetail(
                id=ident * 10 + 1, description="More", price=Decimal("-0.0"), tax_rate_id=2
            ),
        ],
        **kwargs,  # type: ignore[arg-type]
    )


def test_json_safe_form_keeps_every_digit() -> None:
    data = m.to_jsonable(invoice(1, "181.50", extra={"sepa_active": True, "fee": Decimal("0.21")}))
    text = json.dumps(data)  # the point: no TypeError for Decimal, date or datetime
    back = json.loads(text)
    assert back["total_paid"] == "181.50"
    assert back["discount"] == "17.5"
    assert back["invoice_date"] == "2014-07-30"
    assert back["created_at"] == "2014-07-30T17:33:41+02:00"
    assert back["state"] == "open"
    assert back["details"][0]["price"] == "60.50"
    assert back["details"][1]["price"] == "-0.0"
    assert back["extra"] == {"sepa_active": True, "fee": "0.21"}


def test_invoices_dataframe_has_typed_columns_and_exact_money() -> None:
    frame = invoices_dataframe([invoice(1, "181.50"), invoice(2, "0.10", po_number="PO-9")])
    assert list(frame["id"]) == [1, 2]
    assert str(frame["id"].dtype) == "Int64"
    assert frame["contact_id"].isna().all()  # None becomes <NA>, the column stays Int64
    assert str(frame["contact_id"].dtype) == "Int64"
    assert str(frame["prices_are_incl_tax"].dtype) == "boolean"
    assert str(frame["po_number"].dtype).startswith("str")
    assert frame["invoice_date"].dtype.kind == "M"
    assert frame["created_at"].dt.tz is not None
    assert frame["created_at"][0] == pd.Timestamp("2014-07-30T15:33:41Z")
    assert frame["total_paid"].sum() == Decimal("181.60")  # exact, not 181.60000000000002
    assert "details" not in frame.columns
    assert "extra" not in frame.columns


def test_details_dataframe_links_lines_to_invoices() -> None:
    frame = details_dataframe([invoice(1, "1"), invoice(2, "2")])
    assert list(frame["invoice_id"]) == [1, 1, 2, 2]
    assert list(frame["id"]) == [10, 11, 20, 21]
    assert frame["price"].tolist() == [Decimal("60.50"), Decimal("-0.0")] * 2


def test_empty_input_still_has_the_columns() -> None:
    frame = invoices_dataframe([])
    assert len(frame) == 0
    assert "total_paid" in frame.columns
    assert str(frame["id"].dtype) == "Int64"
