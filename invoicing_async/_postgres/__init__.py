"""PostgreSQL plumbing shared by the store, the budget and the jobs: opening pools
(`connect`), the advisory-lock keys (`locks`) and the migration runner (`migrations`).

Below every layer that uses PostgreSQL: imports nothing of ours but `invoicing_async.errors`,
and psycopg only lazily (the `[postgres]` extra is optional).
"""
