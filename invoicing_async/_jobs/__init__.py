"""Accounts, sync jobs and runs in PostgreSQL, run by procrastinate workers (issue #14);
only `tasks` imports procrastinate, and only when a command needs it."""
