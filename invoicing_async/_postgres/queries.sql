-- The migration runner's statements (invoicing_async/_postgres/migrations.py), each under
-- its name; `queries()` there reads files like this one.

-- name: create_migrations
-- One row per migration applied, per component ("store", "budget", "jobs").
CREATE TABLE IF NOT EXISTS invoicing_migrations (
    component text NOT NULL,
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
);

-- name: tables
-- Which of the names exist in the current schema (a scan of pg_class: to_regclass() may
-- see a stale cache while waiting on the advisory lock).
SELECT c.relname FROM pg_catalog.pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(%s);

-- name: versions
SELECT component, max(version) FROM invoicing_migrations GROUP BY component;

-- name: record_migration
INSERT INTO invoicing_migrations (component, version, name) VALUES (%s, %s, %s);
