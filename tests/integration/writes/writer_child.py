"""Keyed writes in their own process, for the chaos and concurrency tests: `run`, in a
child forked from the tests' forkserver (tests/forked.py).

A plan of `creates` invoices, the first `followups` of them also sent, reminded and paid,
each with its own key: a restarted child runs the whole plan again (what was applied is
replayed from the journal without a request), after settling what its killed predecessor
left pending.
"""

from __future__ import annotations

import asyncio
import ssl
from decimal import Decimal
from typing import Any

import attrs

import invoicing_async as ia
from invoicing_async import models as m


@attrs.frozen
class Plan:
    base_url: str
    user: str
    password: str
    ca: str
    journal: str
    fmt: ia.Format
    creates: int
    followups: int
    prefix: str = "order"
    start: int = 0  # the plan's first item (children sharing keys start elsewhere)


RETRY = ia.RetryPolicy(attempts=6, base_delay=0.0, max_delay=0.0, jitter=False)


def invoice() -> m.Invoice:
    lines = [m.InvoiceDetail(description="Widgets", tax_rate_id=1, price=Decimal(10))]
    return m.Invoice(contact_id=7, details=lines)


def payment() -> m.InvoicePayment:
    return m.InvoicePayment(price=Decimal("12.10"), payment_method="bank_transfer")


async def main(plan: Plan, started: Any) -> None:
    context = ssl.create_default_context(cafile=plan.ca)
    async with ia.InvoicingClient(
        plan.base_url,
        auth=ia.BasicAuth(plan.user, plan.password),
        format=plan.fmt,
        ssl=context,
        budget=ia.RateBudget(limit=10_000_000),
        retry=RETRY,
        journal=plan.journal,
    ) as client:
        started()
        await client.resolve_pending_writes()
        for step in range(plan.creates):
            i = (plan.start + step) % plan.creates
            key = f"{plan.prefix}-{i}"
            made = await client.invoices.create(invoice(), idempotency_key=key)
            if i < plan.followups:
                await client.invoices.send_invoice(
                    made, send_method="email", idempotency_key=f"send-{key}"
                )
                await client.invoices.send_reminder(
                    made, send_method="email", idempotency_key=f"remind-{key}"
                )
                await client.invoices.register_payment(
                    made, payment(), idempotency_key=f"pay-{key}"
                )


def run(plan: Plan, started: Any) -> None:
    """In a forked child: the plan, setting `started` once the client is open."""
    asyncio.run(main(plan, started.set))
