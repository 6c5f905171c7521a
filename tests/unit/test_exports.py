"""The public surface, pinned: what each public module exports, and nothing else is public.

A name added to or removed from a public module must be added or removed here too, on
purpose, with the README and CHANGELOG saying so.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import invoicing_async

README = Path(__file__).parents[2] / "README.md"

PUBLIC: dict[str, set[str]] = {
    "invoicing_async": {
        "APIConnectionError",
        "APITimeoutError",
        "Auth",
        "AuthenticationError",
        "BasicAuth",
        "BudgetSnapshot",
        "BudgetUnavailableError",
        "ClientClosedError",
        "ConfigurationError",
        "DecodeError",
        "EventLoopError",
        "FieldError",
        "ForbiddenError",
        "Format",
        "HTTPStatusError",
        "InsecureTransportError",
        "InvoicingClient",
        "InvoicingError",
        "NotAcceptableError",
        "NotFoundError",
        "NotImplementedByServerError",
        "OAuth1Auth",
        "OutgoingRequest",
        "RateBudget",
        "RateLimitExceeded",
        "RawResponse",
        "RedirectError",
        "RequestEvent",
        "ResponseTooLargeError",
        "RetryPolicy",
        "SendError",
        "Sender",
        "ServerError",
        "StoreError",
        "ValidationError",
        "__version__",
    },
    "invoicing_async.errors": {
        "APIConnectionError",
        "APITimeoutError",
        "AuthenticationError",
        "BudgetUnavailableError",
        "ClientClosedError",
        "ConfigurationError",
        "DecodeError",
        "EventLoopError",
        "FieldError",
        "ForbiddenError",
        "HTTPStatusError",
        "InsecureTransportError",
        "InvoicingError",
        "NotAcceptableError",
        "NotFoundError",
        "NotImplementedByServerError",
        "RateLimitExceeded",
        "RedirectError",
        "ResponseTooLargeError",
        "ServerError",
        "StoreError",
        "ValidationError",
    },
    "invoicing_async.models": {
        "CurrentSession",
        "FieldError",
        "FrequencyType",
        "HistoryAction",
        "Invoice",
        "InvoiceDetail",
        "InvoiceFilter",
        "InvoiceHistoryRecord",
        "InvoicePayment",
        "InvoiceState",
        "Model",
        "PaymentMethod",
        "RecurringTemplate",
        "RecurringTemplateDetail",
        "SendMethod",
        "SyncEntry",
        "SyncRevisions",
        "details_dataframe",
        "invoices_dataframe",
        "to_jsonable",
    },
    "invoicing_async.sync": {
        "BATCH_SIZE",
        "BatchCommitted",
        "BatchResult",
        "FetchedBatch",
        "InvoiceDocument",
        "InvoiceSource",
        "MemberError",
        "MemoryStore",
        "PendingEntry",
        "PostgresStore",
        "PushReceiver",
        "SQLiteStore",
        "Store",
        "SyncClient",
        "SyncEngine",
        "SyncPlan",
        "SyncProgress",
        "SyncReport",
        "WriteOutcome",
        "follow_pushes",
        "plan_sync",
        "store_dataframes",
        "write_outcome",
    },
    # Integrations, each behind its own extra.
    "invoicing_async.contrib": set(),
    "invoicing_async.contrib.dlt": {"DELETED_COLUMN", "invoicing_source"},
    "invoicing_async.testing": {
        "Account",
        "FakeClock",
        "FakeInvoicingService",
        "FaultPlan",
        "MockSender",
        "OutgoingRequest",
        "PushEvent",
        "RawResponse",
        "RecordedRequest",
        "SendError",
        "mock_response",
        "populate",
    },
}


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_public_module_exports_exactly_the_pinned_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert set(module.__all__) == PUBLIC[module_name]
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_every_other_module_is_private() -> None:
    """Implementation modules carry a leading underscore somewhere in their dotted path."""
    public_modules = set(PUBLIC) | {"invoicing_async.__main__"}
    leaked = [
        info.name
        for info in pkgutil.walk_packages(invoicing_async.__path__, "invoicing_async.")
        if info.name not in public_modules
        and not any(part.startswith("_") for part in info.name.split(".")[1:])
    ]
    assert leaked == []


def test_errors_are_the_same_objects_everywhere() -> None:
    errors = importlib.import_module("invoicing_async.errors")
    for name in PUBLIC["invoicing_async.errors"]:
        assert getattr(invoicing_async, name) is getattr(errors, name)
    models = importlib.import_module("invoicing_async.models")
    assert models.FieldError is errors.FieldError


def test_the_names_the_readme_uses_exist() -> None:
    """Every `ia.Name` and `from invoicing_async.x import …` in the README resolves."""
    text = README.read_text(encoding="utf-8")
    top = set(re.findall(r"\bia\.([A-Za-z_]\w*)", text))
    assert top, "the README shows no ia.* names"
    assert sorted(top - PUBLIC["invoicing_async"]) == []
    imported = re.findall(r"from (invoicing_async(?:\.\w+)?) import ([\w, ]+)", text)
    assert imported
    submodules = {name.rsplit(".", 1)[-1] for name in PUBLIC} - {"invoicing_async"}
    for module_name, names in imported:
        for name in (n.split(" as ")[0].strip() for n in names.split(",")):
            if module_name == "invoicing_async" and name in submodules:
                continue
            assert name in PUBLIC[module_name], f"{module_name}.{name}"


def test_a_budget_shows_its_settings_and_estimates_only() -> None:
    """The transport's hooks (take, settle, observe) are not part of `RateBudget`'s surface."""
    public = {name for name in dir(invoicing_async.RateBudget) if not name.startswith("_")}
    budget = invoicing_async.RateBudget()
    public |= {name for name in vars(budget) if not name.startswith("_")}
    assert public == {
        "available_now",
        "close",
        "key",
        "limit",
        "period",
        "refresh",
        "reserve",
        "shared",
        "snapshot",
        "time_for",
    }
