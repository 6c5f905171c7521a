"""Accounts, sync jobs and runs in PostgreSQL, run by procrastinate workers (issue #14).

`schema` holds the tables' migration, `accounts` the accounts and their secret references,
`tasks` the procrastinate app (the per-account sync task and the dispatcher), `status` the
runs. Only `tasks` imports procrastinate, and only when a command needs it.
"""
