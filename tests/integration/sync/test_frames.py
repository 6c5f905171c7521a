"""Frames with exact money: Arrow decimals and dates, from models, documents and stores."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from invoicing_async import models as m
from invoicing_async.contrib.pandas import details_dataframe, invoices_dataframe, store_dataframes
from invoicing_async.sync import MemoryStore, PostgresStore, SQLiteStore, SyncEngine
from invoicing_async.testing import FakeInvoicingService

MONEY = pd.ArrowDtype(pa.decimal128(18, 4))


@pytest.fixture
async def stores(tmp_path: Path) -> tuple[MemoryStore, SQLiteStore, list[m.Invoice]]:
    """The same 300 invoices of the fake service, synced into both stores."""
    async with FakeInvoicingService(invoices=300, limit=10**6) as service:
        memory, sqlite = MemoryStore(), SQLiteStore(tmp_path / "mirror.db")
        async with service.client(format="json") as client:
            await SyncEngine(client, memory).run()
            await SyncEngine(client, sqlite).run()
        invoices = [service.account.invoices[i] for i in sorted(service.account.invoices)]
    return memory, sqlite, invoices


def test_money_is_arrow_decimal_and_dates_are_dates() -> None:
    invoice = m.Invoice(
        id=1,
        total_price_incl_tax=Decimal("60.50"),
        exchange_rate=Decimal("1.08765432"),
        invoice_date=pd.Timestamp("2014-07-30").date(),
        details=[m.InvoiceDetail(id=7, price=Decimal("0.0125"))],
    )
    invoices = invoices_dataframe([invoice])
    assert invoices["total_price_incl_tax"].dtype == MONEY
    assert invoices["exchange_rate"].dtype == pd.ArrowDtype(pa.decimal128(18, 8))
    assert invoices["exchange_rate"][0] == Decimal("1.08765432")
    assert invoices["invoice_date"].dtype == pd.ArrowDtype(pa.date32())
    lines = details_dataframe([invoice])
    assert lines["price"].dtype == MONEY
    assert lines["price"][0] == Decimal("0.0125")
    assert "destroy" not in lines.columns


def test_more_places_than_the_column_holds_are_refused_not_rounded() -> None:
    with pytest.raises(pa.ArrowInvalid):
        invoices_dataframe([m.Invoice(id=1, total_paid=Decimal("0.00001"))])


async def test_store_frames_are_exact_and_the_same_for_every_store(
    stores: tuple[MemoryStore, SQLiteStore, list[m.Invoice]],
) -> None:
    memory, sqlite, invoices = stores
    from_models, lines_from_models = await store_dataframes(memory)
    from_documents, lines_from_documents = await store_dataframes(sqlite)
    await sqlite.close()
    pd.testing.assert_frame_equal(from_models, from_documents)
    pd.testing.assert_frame_equal(lines_from_models, lines_from_documents)
    pd.testing.assert_frame_equal(from_models, invoices_dataframe(invoices))
    for name in ("total_price_incl_tax", "total_paid", "total_unpaid", "total_tax"):
        total = sum((getattr(i, name) or Decimal(0) for i in invoices), Decimal(0))
        assert from_documents[name].sum() == total, name  # exact, summed by Arrow
    line_total = sum(
        (line.total_price_incl_tax or Decimal(0) for i in invoices for line in i.details),
        Decimal(0),
    )
    assert lines_from_documents["total_price_incl_tax"].sum() == line_total
    assert lines_from_documents["invoice_id"].tolist() == [
        i.id for i in invoices for _ in i.details
    ]


async def test_documents_are_read_without_building_a_model(
    stores: tuple[MemoryStore, SQLiteStore, list[m.Invoice]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, sqlite, invoices = stores

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("a model was built")

    monkeypatch.setattr("invoicing_async._models.documents.load_model", no_model)
    frame, _ = await store_dataframes(sqlite)
    await sqlite.close()
    assert frame["id"].tolist() == [i.id for i in invoices]


async def test_postgres_frames_are_read_from_documents_and_match(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`PostgresStore` gives its documents too (jsonb read back as text): the frames are
    those of the models, and no model is built for them."""
    async with FakeInvoicingService(invoices=120, limit=10**6) as service:
        memory = MemoryStore()
        async with (
            service.client(format="json") as client,
            PostgresStore(postgres_url, account="frames") as postgres,
        ):
            await SyncEngine(client, memory).run()
            await SyncEngine(client, postgres).run()
            expected, expected_lines = await store_dataframes(memory)
            monkeypatch.setattr(
                "invoicing_async._sync.store.read_stored",
                lambda *a, **k: pytest.fail("a model was built"),
            )
            frame, lines = await store_dataframes(postgres)
    pd.testing.assert_frame_equal(frame, expected)
    pd.testing.assert_frame_equal(lines, expected_lines)
    assert len(frame) == 120


async def test_parquet_round_trips_every_digit(
    stores: tuple[MemoryStore, SQLiteStore, list[m.Invoice]], tmp_path: Path
) -> None:
    _, sqlite, _ = stores
    invoices, lines = await store_dataframes(sqlite)
    await sqlite.close()
    for name, frame in (("invoices", invoices), ("lines", lines)):
        path = tmp_path / f"{name}.parquet"
        frame.to_parquet(path)
        schema = pq.read_schema(path)
        assert schema.field("total_price_incl_tax").type == pa.decimal128(18, 4)
        back = pd.read_parquet(path, dtype_backend="pyarrow")
        assert back.filter(like="total_price").dtypes.eq(MONEY).all()
        pd.testing.assert_frame_equal(back, frame, check_dtype=False)
        for column in frame.filter(like="total_").columns:
            assert back[column].sum() == frame[column].sum()
    assert pq.read_schema(tmp_path / "invoices.parquet").field("invoice_date").type == pa.date32()
