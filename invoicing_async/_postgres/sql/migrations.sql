-- The migration runner's own tables (invoicing_async/_postgres/migrations.py).

-- One row per migration applied, per component ("store", "budget", "jobs").
CREATE TABLE IF NOT EXISTS invoicing_migrations (
    component text NOT NULL,
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
);
