"""`client.recurring_templates`: the five operations of specification part 4.2."""

from __future__ import annotations

import builtins
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

    async def create(self, template: RecurringTemplate) -> RecurringTemplate:
        """Create a template: POST /recurring_templates.xml, 201.

        Checked before sending: contact_id, frequency, frequency_type 1-5, at least one
        line with description and tax_rate_id, and a start date in the future.
        """
        errors = validation.check_template(template, today=self._today())
        self._check(errors, "POST", "/recurring_templates.xml")
        body = self._write("POST", "/recurring_templates.xml", dump_model, template)
        response = await self._transport.request("POST", "/recurring_templates.xml", body=body)
        if response.body.strip():
            return load_model(response.body, self._fmt, RecurringTemplate)
        return await self.get(id_from_location(response.headers.get("Location")))

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
