"""The dlt source's Arrow tables, built from documents as the fetch phase reads them, with
no pipeline: the frames' column table, exact money, the values a column cannot hold."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from invoicing_async._models import export
from invoicing_async._models.stored import InvoiceDocument, load_invoice_documents
from invoicing_async.contrib.dlt import _arrow
from invoicing_async.models import (
    CurrentSession,
    Invoice,
    InvoiceDetail,
    RecurringTemplate,
    RecurringTemplateDetail,
)

CHILD_KEYS = {"_dlt_id", "_dlt_parent_id", "_dlt_root_id", "_dlt_list_idx"}


def documents(*invoices: dict[str, Any]) -> list[InvoiceDocument]:
    """The documents of a sync-fetch body of `invoices`, read as the fetch phase reads it."""
    body = json.dumps([{"invoice": invoice} for invoice in invoices]).encode()
    read, unreadable = load_invoice_documents(body, "json", limit=100, keep_values=True)
    assert not unreadable
    return read


def real(table: pa.Table) -> pa.Table:
    """The rows of a child table but its marker rows (`_dlt_id` "-…")."""
    return table.filter(pc.invert(pc.starts_with(table.column("_dlt_id"), "-")))


FULL = {
    "id": 1,
    "revision": 5,
    "invoice_date": "2024-03-01",
    "created_at": "2024-03-01T10:00:00+02:00",
    "total_price_incl_tax": "121.0000",
    "exchange_rate": "1.12345678",
    "prices_are_incl_tax": False,
    "details": [{"id": 8, "description": "Work", "price": "100.5", "_destroy": False}],
}


def test_the_tables_have_the_frames_columns_and_types() -> None:
    """One column table for both: the invoices' and the lines' columns are the frames'
    (plus `extra` and dlt's keys; a line's `invoice_id` links it in a frame), and the money,
    rates and dates have the same Arrow types in both."""
    read = documents(FULL)
    tables, refused = _arrow.tables(read, scd2=False)
    assert not refused
    invoices, details = tables["invoices"], tables["invoices__details"]
    frames = export.dataframes([d.document for d in read])
    assert set(invoices.column_names) == set(frames[0].columns) | {"_dlt_id"}  # extra: none
    assert set(details.column_names) - CHILD_KEYS == set(frames[1].columns)
    assert "destroy" not in details.column_names  # a request flag, in no table
    for table, frame in zip([invoices, details], frames, strict=True):
        for name in ("total_price_incl_tax", "exchange_rate", "price", "invoice_date"):
            if name in frame.columns:
                assert table.schema.field(name).type == frame[name].dtype.pyarrow_dtype, name
    assert invoices.schema.field("total_price_incl_tax").type == pa.decimal128(18, 4)
    assert invoices.schema.field("exchange_rate").type == pa.decimal128(18, 8)
    assert invoices.schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert invoices.column("total_price_incl_tax").to_pylist() == [Decimal("121.0000")]
    assert details.column("price").to_pylist() == [Decimal("100.5")]


@pytest.mark.parametrize("cls", [Invoice, InvoiceDetail, RecurringTemplate, CurrentSession])
def test_the_dlt_hints_type_the_same_columns(cls: type[Any]) -> None:
    """The columns hinted to dlt are the model's columns of the frames' table and
    `extra`, their types those of the Arrow data (decimals with its precision)."""
    hints = _arrow.columns(cls)
    kinds = export.scalar_columns(cls)
    assert set(hints) == set(kinds) | {"extra"}
    assert hints["extra"]["data_type"] == "json"
    dlt_types = {
        "int": "bigint",
        "bool": "bool",
        "str": "text",
        "date": "date",
        "datetime": "timestamp",
        "decimal": "decimal",
    }
    for name, kind in kinds.items():
        assert hints[name]["data_type"] == dlt_types[kind], name
        if kind == "decimal":
            arrow = export.arrow_type(name, kind)
            assert (hints[name]["precision"], hints[name]["scale"]) == (
                arrow.precision,
                arrow.scale,
            )


def test_line_columns_leave_out_the_request_flag() -> None:
    assert "destroy" not in _arrow.columns(RecurringTemplateDetail)
    assert "destroy" not in export.details_dataframe([]).columns


def test_a_line_its_table_cannot_hold_refuses_its_invoice_alone() -> None:
    """A child row's value decides for its invoice too: a price with five places, never
    rounded, refuses invoice 1 with the reason; the others keep their rows and keys."""
    read = documents(
        {"id": 1, "revision": 5, "details": [{"id": 8, "price": "1.23456"}]},
        {"id": 2, "revision": 5, "mystery": {"a": 1}},
        {"id": 3, "revision": 5, "details": [{"id": 9, "price": "1.5"}]},
    )
    tables, refused = _arrow.tables(read, scd2=False, stored={1, 3})
    assert list(refused) == [1]
    assert "price=1.23456 has more than 4 decimal places" in refused[1]
    invoices = tables["invoices"]
    assert invoices.column("id").to_pylist() == [2, 3]
    assert invoices.column("_dlt_id").to_pylist() == ["2", "3"]
    assert invoices.column("extra").to_pylist() == ['{"mystery": {"a": 1}}', None]
    details = tables["invoices__details"]
    assert real(details).column("price").to_pylist() == [Decimal("1.5")]
    assert real(details).column("_dlt_id").to_pylist() == ["3.0"]
    assert real(details).column("_dlt_root_id").to_pylist() == ["3"]
    # a marker row for each stored invoice of the table: its stored lines are replaced
    assert details.filter(pc.starts_with(details.column("_dlt_id"), "-")).to_pylist() == [
        {**dict.fromkeys(details.column_names), "_dlt_id": "-3", "_dlt_root_id": "3"}
    ]


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("exchange_rate", "1.123456789", "more than 8 decimal places"),
        ("total_price_incl_tax", "12.34567", "more than 4 decimal places"),
        ("total_price_incl_tax", "1E+14", "exceeds DECIMAL(18,4)"),
        ("total_price_incl_tax", "1E+60", "exceeds DECIMAL(18,4)"),
        ("created_at", "9999-12-31T23:59:59-12:00", "out of range in UTC"),
    ],
)
def test_a_value_its_column_cannot_hold_refuses_its_invoice_with_why(
    field: str, value: str, reason: str
) -> None:
    """Never rounded, never a failed table: the invoice is left out with the reason
    naming the column, and the others are in the table."""
    read = documents({"id": 1, "revision": 5, field: value}, {"id": 2, "revision": 5})
    tables, refused = _arrow.tables(read, scd2=False)
    assert list(refused) == [1]
    assert f"Invoice 1: {field}" in refused[1]
    assert reason in refused[1]
    assert tables["invoices"].column("id").to_pylist() == [2]


def test_text_that_is_not_utf8_is_refused_with_why() -> None:
    """A model's lone surrogate (the decoders refuse one in a document before)."""
    session = CurrentSession(id=3, email="\ud800")
    with pytest.raises(_arrow.Refused) as refused:
        _arrow.build(CurrentSession, "current_session", [(3, "3", session)])
    assert refused.value.args[0] == {3: "CurrentSession 3: email is not valid UTF-8 text"}


def test_an_invoice_left_without_lines_has_a_marker_row_only() -> None:
    """A stored invoice's lines are replaced even by none: its marker row, no real row."""
    tables, _ = _arrow.tables(documents({"id": 4, "revision": 6, "details": []}), scd2=False)
    assert tables["invoices__details"].num_rows == 0  # not stored: nothing to replace
    tables, _ = _arrow.tables(
        documents({"id": 4, "revision": 6, "details": []}), scd2=False, stored={4}
    )
    details = tables["invoices__details"]
    assert real(details).num_rows == 0
    assert details.column("_dlt_root_id").to_pylist() == ["4"]


def test_scd2_keys_a_version_by_its_document_and_sends_no_markers() -> None:
    first = documents({"id": 1, "revision": 5, "details": [{"id": 8, "price": "1"}]})
    again = documents({"id": 1, "revision": 5, "details": [{"id": 8, "price": "1"}]})
    changed = documents({"id": 1, "revision": 6, "details": [{"id": 8, "price": "2"}]})
    keys = [
        _arrow.tables(d, scd2=True, stored={1})[0]["invoices"].column("_dlt_id").to_pylist()[0]
        for d in (first, again, changed)
    ]
    assert keys[0] == keys[1] != keys[2]
    assert len(keys[0]) == 32
    details = _arrow.tables(first, scd2=True, stored={1})[0]["invoices__details"]
    assert details.column("_dlt_id").to_pylist() == [f"{keys[0]}.0"]  # no marker row
    assert details.column("_dlt_root_id").to_pylist() == [keys[0]]


def test_deletion_markers_name_the_invoices() -> None:
    root = _arrow.markers([7, 9], [], root=True)
    assert root.to_pylist() == [{"id": 7, "_dlt_id": "-7"}, {"id": 9, "_dlt_id": "-9"}]
    assert not root.schema.field("_dlt_id").nullable  # NOT NULL, as in dlt's schema
    child = _arrow.markers([7], ["7"], root=False)
    assert child.to_pylist() == [{"_dlt_id": "-7", "_dlt_root_id": "7"}]


def test_a_strict_struct_has_no_extra_and_a_model_its_own() -> None:
    """Unknown fields land in `extra` as JSON text; a table whose rows have none has no
    `extra` column (dlt fills it); the session's is its own."""
    tables, _ = _arrow.tables(documents({"id": 1, "revision": 5}), scd2=False)
    assert "extra" not in tables["invoices"].column_names
    session = CurrentSession(id=3, email="a@example.com", extra={"locale": "ünï"})
    table = _arrow.build(CurrentSession, "current_session", [(0, "3", session)])
    assert json.loads(table["current_session"].column("extra")[0].as_py()) == {"locale": "ünï"}


@st.composite
def notations(draw: st.DrawFn) -> tuple[str, int, int]:
    """(text, mantissa, exponent) of the amount mantissa * 10^exponent written in one of
    its notations: exponent form (either case, a sign or not, the digits shifted), plain
    with a `+`, leading or trailing zeros, `-0`."""
    mantissa = draw(st.integers(-(10**20), 10**20))
    exponent = draw(st.integers(-30, 70))
    shift = draw(st.integers(0, 6))
    digits, places = abs(mantissa) * 10**shift, exponent - shift
    sign = "-" if mantissa < 0 or (mantissa == 0 and draw(st.booleans())) else ""
    sign = sign or draw(st.sampled_from(["", "+"]))
    zeros = "0" * draw(st.integers(0, 3))
    if draw(st.booleans()):
        mark = draw(st.sampled_from(["e", "E"]))
        plus = draw(st.sampled_from(["", "+"])) if places >= 0 else ""
        return f"{sign}{zeros}{digits}{mark}{plus}{places}", mantissa, exponent
    text = str(digits * 10 ** max(places, 0)).rjust(max(-places, 0) + 1, "0")
    if places < 0:
        text = f"{text[:places]}.{text[places:]}"
    return f"{sign}{zeros}{text}", mantissa, exponent


@given(notations(), st.booleans())
@example(("1E+60", 1, 60), False)
@example(("0E+100", 0, 0), False)
@example(("-0", 0, 0), False)
@example(("+12", 12, 0), False)
@example(("0012.50000", 125, -1), False)
def test_an_amount_is_judged_by_value_whatever_its_notation(
    amount: tuple[str, int, int], bare: bool
) -> None:
    """An amount DECIMAL(18,4) holds exactly loads as its value, in the source's tables
    and in a frame; any other (more than 4 places, 15 integer digits or more) is refused
    with why, in any notation, and its invoice alone is left out."""
    text, mantissa, exponent = amount
    scaled = mantissa * 10 ** (exponent + 4) if exponent >= -4 else None
    if scaled is None and mantissa % 10 ** (-exponent - 4) == 0:
        scaled = mantissa // 10 ** (-exponent - 4)
    held = scaled is not None and abs(scaled) < 10**18
    json_number = re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", text)
    written = text if bare and json_number else json.dumps(text)
    body = (
        b'[{"invoice": {"id": 1, "revision": 5, "total_price_incl_tax": %s}},'
        b' {"invoice": {"id": 2, "revision": 5, "total_price_incl_tax": "1.5"}}]'
    ) % written.encode()
    read, unreadable = load_invoice_documents(body, "json", limit=100, keep_values=True)
    assert not unreadable
    tables, refused = _arrow.tables(read, scd2=False)
    totals = tables["invoices"].column("total_price_incl_tax").to_pylist()
    value = Decimal(mantissa).scaleb(exponent)
    if held:
        assert not refused
        assert totals == [value, Decimal("1.5")]
        frame = export.invoices_dataframe([d.document for d in read])
        assert list(frame.total_price_incl_tax) == [value, Decimal("1.5")]
    else:
        assert list(refused) == [1]
        assert "decimal places" in refused[1] or "exceeds DECIMAL(18,4)" in refused[1]
        assert totals == [Decimal("1.5")]
        with pytest.raises(ValueError, match="total_price_incl_tax"):
            export.invoices_dataframe([read[0].document])
