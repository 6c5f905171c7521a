"""`client.recurring_templates`: the five operations of specification part 4.2."""

from __future__ import annotations

import builtins
from typing import Any

from invoicing_async._models.converter import changes_to_wire
from invoicing_async._models.documents import dump_model, load_list, load_model, root_name
from invoicing_async._resources import validation
from invoicing_async._resources.base import Resource, id_from_location, segment
from invoicing_async.models import RecurringTemplate

__all__ = ["RecurringTemplatesResource"]


class RecurringTemplatesResource(Resource):
    """Recurring templates of the account. Every method costs one request."""

    async def list(self) -> builtins.list[RecurringTemplate]:
        """All templates: GET /recurring_templates.xml."""
        response = await self._transport.request("GET", "/recurring_templates.xml")
        return load_list(response.body, self._fmt, RecurringTemplate)

    async def get(self, template_id: int) -> RecurringTemplate:
        """One template: GET /recurring_templates/:id.xml. Raises `NotFoundError`."""
        response = await self._transport.request(
            "GET", f"/recurring_templates/{segment(template_id)}.xml"
        )
        return load_model(response.body, self._fmt, RecurringTemplate)

    async def create(self, template: RecurringTemplate) -> RecurringTemplate:
        """Create a template: POST /recurring_templates.xml, 201.

        Checked before sending: contact_id, frequency, frequency_type 1-5, at least one
        line with description and tax_rate_id, and a start date in the future.
        """
        errors = validation.check_template(template, today=self._today())
        self._check(errors, "POST", "/recurring_templates.xml")
        response = await self._transport.request(
            "POST", "/recurring_templates.xml", body=dump_model(template, self._fmt)
        )
        if response.body.strip():
            return load_model(response.body, self._fmt, RecurringTemplate)
        return await self.get(id_from_location(response.headers.get("Location")))

    async def update(self, template_id: int, **changes: Any) -> RecurringTemplate:
        """Change the named attributes only: PUT /recurring_templates/:id.xml.

        When the service answers without a body, the template is fetched (a second request).
        """
        path = f"/recurring_templates/{segment(template_id)}.xml"
        errors = validation.check_template_changes(changes, today=self._today())
        self._check(errors, "PUT", path)
        data = changes_to_wire(RecurringTemplate, changes, style=self._fmt)
        body = self._encode(root_name(RecurringTemplate, "json"), data)
        response = await self._transport.request("PUT", path, body=body)
        if response.body.strip():
            return load_model(response.body, self._fmt, RecurringTemplate)
        return await self.get(template_id)

    async def delete(self, template_id: int) -> None:
        """Delete a template: DELETE /recurring_templates/:id.xml."""
        await self._transport.request("DELETE", f"/recurring_templates/{segment(template_id)}.xml")
