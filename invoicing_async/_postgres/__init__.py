"""PostgreSQL plumbing shared by the store, the budget and the jobs (pools, advisory-lock
keys, migrations); psycopg is imported lazily."""
