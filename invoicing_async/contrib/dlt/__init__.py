"""A dlt source for the Invoicing Service: an account's invoices into any dlt destination.

``pipeline.run(invoicing_source(base_url=…))`` loads `invoices` (merged on `id`, with its
child tables, incremental by revision against the `{id: revision}` read back from the
destination), `recurring_templates` and `current_session` as Arrow tables. The invoices
come from the sync engine's own fetch phase, with its retries and quarantine. The guide
(Pipelines and analytics) tells how loads, deletions, scd2 and the budget behave.
"""

from __future__ import annotations

from invoicing_async.contrib.dlt._source import invoicing_source

__all__ = ["invoicing_source"]
