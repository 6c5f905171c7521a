"""`client.recurring_templates`: the five operations of specification part 4.2."""

from __future__ import annotations

import builtins
import functools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from invoicing_async._models.documents import load_list, load_model
from invoicing_async._models.payloads import dump_changes, dump_model
from invoicing_async._resources import validation
from invoicing_async._resources.base import (
    Resource,
    id_from_location,
    id_of,
    segment,
    sets_attributes_only,
)
from invoicing_async._resources.decoding import decode_off_loop, iter_models
from invoicing_async._transport.response import server_time
from invoicing_async._writes.core import CLOCK_TOLERANCE, Intent, on_service_clock
from invoicing_async._writes.once import Answer, KeyedWrite
from invoicing_async.models import RecurringTemplate

__all__ = ["RecurringTemplatesResource"]


class RecurringTemplatesResource(Resource):
    """Recurring templates of the account. Every method costs one request.

    Methods that name a template take its id or the `RecurringTemplate` itself.
    """

    async def list(self) -> builtins.list[RecurringTemplate]:
        """All templates: GET /recurring_templates.xml."""
        response = await self._transport.request("GET", "/recurring_templates.xml")
        return await decode_off_loop(load_list, response.body, self._fmt, RecurringTemplate)

    async def iter(self) -> AsyncIterator[RecurringTemplate]:
        """`list()` as an async iterator, decoded off the event loop a batch at a time."""
        response = await self._transport.request("GET", "/recurring_templates.xml")
        async for template in iter_models(response.body, self._fmt, RecurringTemplate):
            yield template

    async def get(self, template: int | RecurringTemplate) -> RecurringTemplate:
        """One template: GET /recurring_templates/:id.xml. Raises `NotFoundError`."""
        response = await self._transport.request("GET", self._path(template))
        return load_model(response.body, self._fmt, RecurringTemplate)

    async def create(
        self, template: RecurringTemplate, *, idempotency_key: str | None = None
    ) -> RecurringTemplate:
        """Create a template: POST /recurring_templates.xml, 201.

        Checked before sending: contact_id, frequency, frequency_type 1-5, at least one
        line with description and tax_rate_id, and a start date in the future. With
        `idempotency_key`, created at most once for the key (a template has no text field
        to carry a marker: a look matches contact, schedule and lines of templates made
        since the intent).
        """
        errors = validation.check_template(template, today=self._today())
        self._check(errors, "POST", "/recurring_templates.xml")
        body = self._write("POST", "/recurring_templates.xml", dump_model, template)
        send = functools.partial(self._created, body)
        if idempotency_key is None:
            answer = (await send()).body
        else:
            detail = json.dumps(_signature(template))
            write = KeyedWrite("create_template", idempotency_key, None, body, detail)
            answer = await self._once(write, send)
        return load_model(answer, self._fmt, RecurringTemplate)

    async def _created(self, body: bytes) -> Answer:
        response = await self._transport.request("POST", "/recurring_templates.xml", body=body)
        if response.body.strip():
            return Answer(response.body)
        ident = id_from_location(response.headers.get("Location"))
        fetched = await self._transport.request("GET", self._path(ident))
        return Answer(fetched.body, ident)

    async def _look(self, intent: Intent) -> Answer | None:
        """A template made since the intent with the request's contact, schedule and lines:
        one GET of the list."""
        wanted = json.loads(intent.detail)
        response = await self._transport.request("GET", "/recurring_templates.xml")
        server_now = server_time(response.headers)
        at = on_service_clock(intent.at, now=time.time(), server_now=server_now)
        for template in load_list(response.body, self._fmt, RecurringTemplate):
            if _matches(wanted, _signature(template)) and (
                template.created_at is None
                or template.created_at.timestamp() >= at - CLOCK_TOLERANCE
            ):
                return Answer(dump_model(template, self._fmt, mode="document"), template.id)
        return None

    async def update(
        self, template: int | RecurringTemplate, /, **changes: Any
    ) -> RecurringTemplate:
        """Change the named attributes only: PUT /recurring_templates/:id.xml.

        When the service answers without a body, the template is fetched (a second request).
        """
        path = self._path(template)
        errors = validation.check_template_changes(changes, today=self._today())
        self._check(errors, "PUT", path)
        body = self._write("PUT", path, dump_changes, RecurringTemplate, changes)
        idempotent = sets_attributes_only(changes)
        response = await self._transport.request("PUT", path, body=body, idempotent=idempotent)
        if response.body.strip():
            return load_model(response.body, self._fmt, RecurringTemplate)
        return await self.get(template)

    async def delete(self, template: int | RecurringTemplate) -> None:
        """Delete a template: DELETE /recurring_templates/:id.xml."""
        await self._transport.request("DELETE", self._path(template))

    @staticmethod
    def _path(template: int | RecurringTemplate) -> str:
        return f"/recurring_templates/{segment(id_of(template, RecurringTemplate))}.xml"


def _signature(template: RecurringTemplate) -> list[Any]:
    """What tells a template made by a keyed create from others: contact, schedule, lines."""
    return [
        template.contact_id,
        template.frequency_type,
        None if template.start_date is None else template.start_date.isoformat(),
        [
            [d.description, None if d.price is None else str(d.price), d.tax_rate_id]
            for d in template.details
            if not d.destroy
        ],
    ]


def _matches(wanted: Any, found: Any) -> bool:
    """Whether a template's signature has the request's: what the request left out (None)
    the service filled in."""
    if wanted is None:
        return True
    if isinstance(wanted, list):
        return (
            isinstance(found, list)
            and len(wanted) == len(found)
            and all(_matches(w, f) for w, f in zip(wanted, found, strict=True))
        )
    return bool(wanted == found)
