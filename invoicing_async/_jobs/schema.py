"""The jobs layer's tables: accounts and their runs (migrations in ``_jobs/sql/``)."""

from __future__ import annotations

from invoicing_async._postgres.migrations import Component

__all__ = ["SCHEMA"]

SCHEMA = Component("jobs", "invoicing_async._jobs")
