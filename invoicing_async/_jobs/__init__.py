"""Accounts, sync jobs and runs in PostgreSQL, run by procrastinate workers (issue #14);
only `tasks` imports procrastinate, and only when a command needs it. Every statement of
the layer is in ``queries.sql``, in `SQL` by name."""

from invoicing_async._postgres.migrations import queries

SQL = queries(__name__)
