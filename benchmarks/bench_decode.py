"""Decode throughput: 100-invoice responses (5 lines each) from bytes to models, against
bare `xmltodict.parse` / `json.loads` of the same bytes."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import xmltodict

from benchmarks.common import Result, best_of
from invoicing_async import Format
from invoicing_async._models.documents import dump_list, load_list
from invoicing_async.models import Invoice
from invoicing_async.testing import FakeInvoicingService


def run() -> list[Result]:
    service = FakeInvoicingService(invoices=100, seed=1)
    invoices = list(service.account.invoices.values())
    results = []
    cases: tuple[tuple[Format, Callable[[bytes], Any], float], ...] = (
        ("xml", xmltodict.parse, 1.25),
        ("json", json.loads, 6.0),
    )
    for fmt, baseline_fn, target in cases:
        body = dump_list(invoices, fmt, Invoice)
        assert load_list(body, fmt, Invoice) == invoices

        def baseline(b: bytes = body, f: Callable[[bytes], Any] = baseline_fn) -> Any:
            return f(b)

        def decode(b: bytes = body, f: Format = fmt) -> Any:
            return load_list(b, f, Invoice)

        base = best_of(baseline)
        ours = best_of(decode)
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
