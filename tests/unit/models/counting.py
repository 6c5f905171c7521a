"""Counting the invoices made: the converter is the one builder, and it calls the class."""

from __future__ import annotations

from typing import Any

import pytest

from invoicing_async.models import Invoice

__all__ = ["invoices_made"]


def invoices_made(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every `Invoice` made from now on (until `monkeypatch` is undone): its id, once per
    invoice."""
    made: list[Any] = []
    original_init = Invoice.__init__

    def counting_init(self: Invoice, **kwargs: Any) -> None:
        made.append(kwargs.get("id"))
        original_init(self, **kwargs)

    monkeypatch.setattr(Invoice, "__init__", counting_init)
    return made
