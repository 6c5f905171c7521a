-- The migration runner's own tables (invoicing_async/_postgres/migrations.py).

-- One row per migration applied, per component ("store", "budget", "jobs").
CREATE TABLE IF NOT EXISTS invoicing_migrations (
    component text NOT NULL,
    version integer NOT NULL,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (component, version)
);

-- Where releases before the runner kept one version for the store and the jobs together
-- (1: the store's tables, 2: the accounts and runs). A version they do not know makes
-- them refuse this database ("newer than this package's: upgrade invoicing-async")
-- instead of writing to tables they no longer understand.
CREATE TABLE IF NOT EXISTS invoicing_schema (
    version integer PRIMARY KEY,
    description text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO invoicing_schema (version, description)
VALUES (1000, 'superseded by invoicing_migrations: upgrade invoicing-async')
ON CONFLICT (version) DO NOTHING;
