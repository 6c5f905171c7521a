"""encode -> decode gives back every model exactly, in both formats."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from invoicing_async._models.documents import load_list, load_model
from invoicing_async._models.fields import field_specs
from invoicing_async._models.payloads import ROOTS, Format, dump_model
from invoicing_async.models import (
    CurrentSession,
    Invoice,
    InvoiceDetail,
    InvoiceHistoryRecord,
    InvoicePayment,
    Model,
    RecurringTemplate,
    RecurringTemplateDetail,
)
from invoicing_async.testing._writers import dump_list
from tests.unit.models.strategies import models

ALL_MODELS = [
    Invoice,
    InvoiceDetail,
    InvoiceHistoryRecord,
    InvoicePayment,
    RecurringTemplate,
    RecurringTemplateDetail,
    CurrentSession,
]
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def writable_only(model: Any) -> Any:
    """What survives a request body: read-only attributes and `extra` are not sent."""
    changes: dict[str, Any] = {"extra": {}}
    for spec in field_specs(type(model)):
        value = getattr(model, spec.name)
        if spec.read_only:
            changes[spec.name] = [] if spec.item_model is not None else None
        elif spec.item_model is not None:
            changes[spec.name] = [writable_only(item) for item in value]
    return attrs.evolve(model, **changes)


@pytest.mark.parametrize("cls", [c for c in ALL_MODELS if c in ROOTS])
@pytest.mark.parametrize("fmt", ["xml", "json"])
@SETTINGS
@given(data=st.data())
def test_document_round_trip(cls: type[Model], fmt: Format, data: st.DataObject) -> None:
    model = data.draw(models(cls))
    assert load_model(dump_model(model, fmt, mode="document"), fmt, cls) == model


@pytest.mark.parametrize("cls", [Invoice, InvoicePayment, RecurringTemplate])
@pytest.mark.parametrize("fmt", ["xml", "json"])
@SETTINGS
@given(data=st.data())
def test_request_round_trip_sends_only_writable(
    cls: type[Model], fmt: Format, data: st.DataObject
) -> None:
    model = data.draw(models(cls))
    decoded = load_model(dump_model(model, fmt), fmt, cls)
    assert decoded == writable_only(model)


@pytest.mark.parametrize("fmt", ["xml", "json"])
@SETTINGS
@given(invoices=st.lists(models(Invoice), max_size=3))
def test_list_round_trip_zero_one_many(fmt: Format, invoices: list[Invoice]) -> None:
    assert load_list(dump_list(invoices, fmt, Invoice), fmt, Invoice) == invoices
