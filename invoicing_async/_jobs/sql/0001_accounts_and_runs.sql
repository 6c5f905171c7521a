-- Accounts (secrets by reference) and their sync runs.
-- An account holds where its secrets live (env:VAR or file:/path), never a secret.
-- due_at drives the dispatcher: due when it has passed, NULL while a job is queued or
-- running (the run sets it again when it ends). A run is one attempt to sync one account.
-- IF NOT EXISTS: databases of older releases may have these tables already.
CREATE TABLE IF NOT EXISTS invoicing_accounts (
    name text PRIMARY KEY,
    base_url text NOT NULL,
    host text NOT NULL,
    format text NOT NULL DEFAULT 'xml' CHECK (format IN ('xml', 'json')),
    auth text NOT NULL DEFAULT 'basic' CHECK (auth IN ('basic', 'oauth1')),
    username text NOT NULL,
    secret_ref text NOT NULL CHECK (secret_ref ~ '^(env|file):.'),
    token text,
    token_secret_ref text CHECK (token_secret_ref ~ '^(env|file):.'),
    ca_file text,
    hourly_limit integer NOT NULL DEFAULT 350 CHECK (hourly_limit > 0),
    every_seconds integer NOT NULL DEFAULT 86400 CHECK (every_seconds > 0),
    due_at timestamptz DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS invoicing_accounts_due ON invoicing_accounts (due_at);
CREATE TABLE IF NOT EXISTS invoicing_runs (
    id bigserial PRIMARY KEY,
    account text NOT NULL,
    job_id bigint,
    worker text,
    started_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    status text NOT NULL DEFAULT 'running' CHECK (status IN
        ('running', 'complete', 'incomplete', 'budget', 'error', 'locked', 'lost')),
    requests integer NOT NULL DEFAULT 0,
    created integer NOT NULL DEFAULT 0,
    updated integer NOT NULL DEFAULT 0,
    deleted integer NOT NULL DEFAULT 0,
    done integer NOT NULL DEFAULT 0,
    total integer NOT NULL DEFAULT 0,
    eta_seconds double precision,
    error text
);
CREATE INDEX IF NOT EXISTS invoicing_runs_account ON invoicing_runs (account, id);
CREATE INDEX IF NOT EXISTS invoicing_runs_job ON invoicing_runs (job_id);
-- An account's failures in a row: its error runs since the last run that got through
-- (locked and lost runs say nothing of the account and neither end nor extend a streak).
CREATE OR REPLACE FUNCTION invoicing_failures(account text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM invoicing_runs f WHERE f.account = $1 AND f.status = 'error'
    AND f.id > coalesce((SELECT max(e.id) FROM invoicing_runs e WHERE e.account = $1
        AND e.status IN ('complete', 'incomplete', 'budget')), 0)
$$;
