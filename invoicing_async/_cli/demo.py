"""`invoicing-async demo`: the whole product in under a minute, against the fake service."""

from __future__ import annotations

import datetime as dt
import random
import tempfile
from contextlib import AsyncExitStack
from decimal import Decimal
from pathlib import Path

import invoicing_async as ia
from invoicing_async import models as m
from invoicing_async._account_run import AccountRun, RunOutcome, exit_code
from invoicing_async._sync.plan import batches_for
from invoicing_async._sync.sqlite import SQLiteStore
from invoicing_async.testing import FakeClock, FakeInvoicingService

__all__ = ["run_demo"]


def _line(title: str, outcome: RunOutcome) -> str:
    return (
        f"{title:<14} listed {outcome.total:>5}  new {outcome.created:>5}  "
        f"updated {outcome.updated:>3}  deleted {outcome.deleted:>3}  "
        f"unchanged {0 if outcome.report is None else outcome.report.unchanged:>5}  "
        f"requests {outcome.requests:>3}  ({outcome.seconds:.1f}s)"
    )


async def run_demo(*, invoices: int, db: Path | None, fmt: str, seed: int, progress: bool) -> int:
    """Sync a generated account, change it on the service, sync again; print the costs (the
    store in a temporary folder unless `db` names a file to keep)."""
    print(
        f"Starting the fake service with {invoices} generated invoices (seed {seed})...", flush=True
    )
    # Noon today (UTC) on the service's clock: the hour it moves below never crosses a
    # midnight, whose daily run would turn invoices late between the syncs.
    noon = dt.datetime.combine(
        dt.datetime.now(dt.timezone.utc).date(), dt.time(12), dt.timezone.utc
    )
    async with AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="invoicing-async-demo-")))
        store_path = db if db is not None else tmp / "invoices.sqlite3"
        service = await stack.enter_async_context(
            FakeInvoicingService(invoices=invoices, seed=seed, clock=FakeClock(noon))
        )
        print(f"  {service.base_url}  (TLS with a throwaway CA, {fmt.upper()} format)", flush=True)
        ca = tmp / "ca.pem"
        service.write_ca(ca)

        async def sync(title: str, *, progress: bool = False) -> RunOutcome:
            outcome = await AccountRun(
                account="demo",
                base_url=service.base_url,
                auth=ia.BasicAuth(service.username, service.password),
                open_store=lambda: SQLiteStore(store_path),
                format="json" if fmt == "json" else "xml",
                ca_file=ca,
                progress=progress,
            ).run()
            print(_line(title, outcome) if outcome.report else f"{title}: {outcome.error}")
            return outcome

        first = await sync("first sync", progress=progress)

        rng = random.Random(seed)
        ids = sorted(service.account.invoices)
        changed = rng.sample(ids, min(25, len(ids)))
        for ident in changed[:20]:
            service.account.mutate(ident)
        for ident in changed[20:]:
            service.account.delete_invoice(ident)
        async with service.client(format=fmt) as client:
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
            print(
                "The fake service's clock moves on an hour before the next syncs "
                "(its hourly budget starts afresh)",
                flush=True,
            )
            second = await sync("second sync")
            third = await sync("third sync")

            if created.id is None:
                raise ia.DecodeError("the service created an invoice without an id")
            async with SQLiteStore(store_path) as store:
                stored = await store.get(created.id)
                late = await store.by_state("late")
                live = len(await store.revisions())
            where = f" in {store_path}" if db is not None else ""
            print(f"Stored copy: {live} live invoices{where}, {len(late)} of them late")
            print(f"  invoice {created.id}: {stored!r}")
            # Methods that name an invoice take the model as well as its id.
            fresh = await client.invoices.get(created)
            print(f"  the same as the service's copy: {stored == fresh} (1 request)")
        expected = 1 + batches_for(invoices)
        window = service.account.window
        print(
            f"Requests: first sync {first.requests} (minimum {expected}), second "
            f"{second.requests} (minimum 2), third {third.requests} (minimum 1); "
            f"the service's hourly budget has {window.remaining} of {window.limit} left "
            "in the hour since its clock moved"
        )
    return exit_code([first, second, third])
