"""`invoicing-async demo`: the whole product in under a minute, against the fake service."""

from __future__ import annotations

import random
import tempfile
from decimal import Decimal
from pathlib import Path

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._cli.progress import ProgressBar
from invoicing_async._sync.engine import SyncEngine
from invoicing_async._sync.plan import batches_for
from invoicing_async._sync.report import SyncReport
from invoicing_async._sync.sqlite import SQLiteStore
from invoicing_async.testing import FakeInvoicingService

__all__ = ["run_demo"]


def _line(title: str, report: SyncReport) -> str:
    return (
        f"{title:<14} listed {report.listed:>5}  new {report.created:>5}  "
        f"updated {report.updated:>3}  deleted {report.deleted:>3}  "
        f"unchanged {report.unchanged:>5}  requests {report.requests:>3}  "
        f"({report.seconds:.1f}s)"
    )


async def run_demo(*, invoices: int, db: Path | None, fmt: str, seed: int, progress: bool) -> int:
    """Sync a generated account, change it on the service, sync again; print the costs."""
    tmp = None
    if db is None:
        tmp = tempfile.TemporaryDirectory(prefix="invoicing-async-demo-")
        db = Path(tmp.name) / "invoices.sqlite3"
    print(
        f"Starting the fake service with {invoices} generated invoices (seed {seed})...", flush=True
    )
    async with FakeInvoicingService(invoices=invoices, seed=seed) as service:
        print(f"  {service.base_url}  (TLS with a throwaway CA, {fmt.upper()} format)", flush=True)
        # The service allows 350 requests an hour and the demo needs about 35: the default
        # budget lets them all go at once.
        budget = ia.RateBudget()
        async with (
            service.client(format=fmt, budget=budget) as client,
            SQLiteStore(db) as store,
        ):
            bar = ProgressBar("first sync") if progress else None
            first = await SyncEngine(client, store, on_progress=bar.update if bar else None).run()
            if bar:
                bar.close()
            print(_line("first sync", first), flush=True)

            rng = random.Random(seed)
            ids = sorted(service.account.invoices)
            changed = rng.sample(ids, min(25, len(ids)))
            for ident in changed[:20]:
                service.account.mutate(ident)
            for ident in changed[20:]:
                service.account.delete_invoice(ident)
            created = await client.invoices.create(
                m.Invoice(
                    contact_id=7,
                    company_name="Demo & Co",
                    details=[
                        m.InvoiceDetail(
                            description="Demo work", tax_rate_id=1, price=Decimal("99.95")
                        )
                    ],
                )
            )
            print(
                f"On the service: changed {len(changed[:20])}, deleted {len(changed[20:])}, "
                f"created invoice {created.id} (1 request)"
            )

            # An hour passes on the service's clock before the next sync. (A sync within
            # the second of a change would read that invoice again on the run after it:
            # revisions are whole seconds, and it may change again in the same second.)
            service.clock.advance(seconds=3600)
            second = await SyncEngine(client, store).run()
            print(_line("second sync", second))
            third = await SyncEngine(client, store).run()
            print(_line("third sync", third))

            if created.id is None:
                raise ia.DecodeError("the service created an invoice without an id")
            stored = await store.get(created.id)
            late = await store.by_state("late")
            print(f"Stored copy: {len(await store.revisions())} live invoices in {db}")
            print(f"  invoice {created.id}: {stored!r}")
            # Methods that name an invoice take the model as well as its id.
            fresh = await client.invoices.get(created)
            print(f"  the same as the service's copy: {stored == fresh} (1 request)")
            print(
                f"  {len(late)} late invoices; budget now {client.budget.snapshot().remaining} "
                "requests left this hour"
            )
            expected = 1 + batches_for(invoices)
            print(
                f"Requests: first sync {first.requests} (minimum {expected}), second "
                f"{second.requests} (minimum 2), third {third.requests} (minimum 1); "
                f"the service's hourly window has {service.account.window.remaining} of "
                f"{service.account.window.limit} left"
            )
            ok = first.complete and second.complete and third.complete
    if tmp is not None:
        tmp.cleanup()
    return 0 if ok else 1
