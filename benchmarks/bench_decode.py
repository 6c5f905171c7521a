"""Decode throughput: 100-invoice responses (5 lines each) from bytes to models, against
bare `xmltodict.parse` / `json.loads` of the same bytes."""

from __future__ import annotations

import json

import xmltodict

from benchmarks.common import Result, best_of
from invoicing_async._models.documents import dump_list, load_list
from invoicing_async.models import Invoice
from invoicing_async.testing import FakeInvoicingService


def run() -> list[Result]:
    service = FakeInvoicingService(invoices=100, seed=1)
    invoices = list(service.account.invoices.values())
    results = []
    for fmt, baseline_fn, target in (
        ("xml", xmltodict.parse, 1.25),
        ("json", json.loads, 6.0),
    ):
        body = dump_list(invoices, fmt, Invoice)  # type: ignore[arg-type]
        assert load_list(body, fmt, Invoice) == invoices  # type: ignore[arg-type]
        base = best_of(lambda b=body, f=baseline_fn: f(b))
        ours = best_of(lambda b=body, f=fmt: load_list(b, f, Invoice))  # type: ignore[misc]
        results.append(
            Result(
                name=f"decode {fmt}: seconds per 100-invoice response",
                ours=ours,
                baseline=base,
                unit="s",
                target=target,
                note=f"{len(body)} bytes; {100 / ours:,.0f} invoices/s "
                f"(baseline {'xmltodict.parse' if fmt == 'xml' else 'json.loads'})",
            )
        )
    return results
