"""Counting the invoices made, whichever way: the converter calls the class, the
generated builders of `strict_json` only store attributes (no `__init__`)."""

from __future__ import annotations

from typing import Any

import pytest

from invoicing_async._models import strict_json
from invoicing_async.models import Invoice

__all__ = ["invoices_made"]


def invoices_made(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every `Invoice` made from now on (until `monkeypatch` is undone), whoever makes it:
    its id, once per invoice."""
    made: list[Any] = []
    original_init = Invoice.__init__
    original_build = strict_json._build  # noqa: SLF001

    def counting_init(self: Invoice, **kwargs: Any) -> None:
        made.append(kwargs.get("id"))
        original_init(self, **kwargs)

    def counting_build(cls: Any, closed: bool) -> Any:
        build = original_build(cls, closed)
        if cls is not Invoice:
            return build

        def counted(struct: Any, tree: Any) -> Any:
            invoice = build(struct, tree)
            made.append(invoice.id)
            return invoice

        return counted

    monkeypatch.setattr(Invoice, "__init__", counting_init)
    monkeypatch.setattr(strict_json, "_build", counting_build)
    return made
