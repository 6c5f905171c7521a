-- The jobs layer's statements (accounts, runs, dispatch and metrics), each under its name;
-- read by invoicing_async._postgres.migrations.queries(). An account's columns are listed
-- in the order of the fields of `Account` (invoicing_async/_jobs/accounts.py).

-- name: add_account
-- Due now; nothing changes when the name is taken.
INSERT INTO invoicing_accounts (name, base_url, host, format, auth, username, secret_ref,
    token, token_secret_ref, ca_file, hourly_limit, every_seconds)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (name) DO NOTHING RETURNING name;

-- name: upsert_accounts
-- Every row in one statement (one array per column); an account imported again keeps its
-- schedule (due_at) and history, and one whose settings are all the same is not written
-- (nor returned). Returns, per account written, whether it is new.
INSERT INTO invoicing_accounts (name, base_url, host, format, auth, username, secret_ref,
    token, token_secret_ref, ca_file, hourly_limit, every_seconds)
SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::text[],
    %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::integer[], %s::integer[])
ON CONFLICT (name) DO UPDATE SET base_url = EXCLUDED.base_url, host = EXCLUDED.host,
    format = EXCLUDED.format, auth = EXCLUDED.auth, username = EXCLUDED.username,
    secret_ref = EXCLUDED.secret_ref, token = EXCLUDED.token,
    token_secret_ref = EXCLUDED.token_secret_ref, ca_file = EXCLUDED.ca_file,
    hourly_limit = EXCLUDED.hourly_limit, every_seconds = EXCLUDED.every_seconds
WHERE (invoicing_accounts.base_url, invoicing_accounts.host, invoicing_accounts.format,
    invoicing_accounts.auth, invoicing_accounts.username, invoicing_accounts.secret_ref,
    invoicing_accounts.token, invoicing_accounts.token_secret_ref, invoicing_accounts.ca_file,
    invoicing_accounts.hourly_limit, invoicing_accounts.every_seconds)
    IS DISTINCT FROM (EXCLUDED.base_url, EXCLUDED.host, EXCLUDED.format, EXCLUDED.auth,
    EXCLUDED.username, EXCLUDED.secret_ref, EXCLUDED.token, EXCLUDED.token_secret_ref,
    EXCLUDED.ca_file, EXCLUDED.hourly_limit, EXCLUDED.every_seconds)
RETURNING xmax = 0;

-- name: list_accounts
SELECT name, base_url, host, format, auth, username, secret_ref, token, token_secret_ref,
    ca_file, hourly_limit, every_seconds, due_at, created_at
FROM invoicing_accounts ORDER BY name;

-- name: remove_account
-- The account and its runs; with purge, its stored invoices too. Returns its name, or no
-- row when there is no such account.
WITH gone AS (
    DELETE FROM invoicing_accounts WHERE name = %(name)s RETURNING name
), runs AS (
    DELETE FROM invoicing_runs WHERE account IN (SELECT name FROM gone)
), invoices AS (
    DELETE FROM invoicing_invoices WHERE %(purge)s AND account IN (SELECT name FROM gone)
), pending AS (
    DELETE FROM invoicing_pending WHERE %(purge)s AND account IN (SELECT name FROM gone)
)
SELECT name FROM gone;

-- name: start_run
-- One statement: the account, its failures in a row, the account's advisory lock
-- (locks.ACCOUNT_RUN; session scoped: held by this connection until finish_run) and the
-- run's row. The failures are invoicing_failures() written out: a SQL function that
-- cannot be inlined is planned anew at each call, where this statement's plan is kept
-- (prepared) by the connection.
WITH acct AS (
    SELECT name, base_url, host, format, auth, username, secret_ref, token,
        token_secret_ref, ca_file, hourly_limit, every_seconds, due_at, created_at
    FROM invoicing_accounts WHERE name = %s
), held AS (
    SELECT pg_try_advisory_lock(hashtextextended('invoicing-account:' || name, 0)) AS ok
    FROM acct
), run AS (
    INSERT INTO invoicing_runs (account, job_id, worker)
    SELECT name, %s, %s FROM acct RETURNING id
)
SELECT a.*, (SELECT count(*) FROM invoicing_runs f WHERE f.account = a.name
        AND f.status = 'error' AND f.id > coalesce((SELECT max(e.id) FROM invoicing_runs e
            WHERE e.account = a.name AND e.status IN ('complete', 'incomplete', 'budget')), 0)),
    (SELECT ok FROM held), (SELECT id FROM run)
FROM acct a;

-- name: record_progress
UPDATE invoicing_runs SET done = %s, total = %s, requests = %s, updated_at = now()
WHERE id = %s AND status = 'running';

-- name: finish_run
-- One statement: the outcome, the account's next due time, and the lock let go.
WITH run AS (
    UPDATE invoicing_runs SET status = %s, requests = %s, created = %s, updated = %s,
        deleted = %s, done = %s, total = %s, eta_seconds = %s, error = %s,
        finished_at = now(), updated_at = now()
    WHERE id = %s
), due AS (
    UPDATE invoicing_accounts SET due_at = now() + make_interval(secs => %s) WHERE name = %s
)
SELECT CASE WHEN %s THEN pg_advisory_unlock(hashtextextended('invoicing-account:' || %s, 0)) END;

-- name: mark_lost
-- The runs of jobs whose worker died become lost; their accounts are due now.
WITH runs AS (
    UPDATE invoicing_runs SET status = 'lost', finished_at = now(), updated_at = now(),
        error = 'the worker stopped answering (killed or cut off) during the run'
    WHERE job_id = ANY(%s) AND status = 'running'
)
UPDATE invoicing_accounts SET due_at = now() WHERE name = ANY(%s);

-- name: close_orphan_runs
-- Runs still running whose account's lock nobody holds: the worker that held it is gone
-- (killed, or its database restarted and dropped the lock; start_run takes the lock and
-- finish_run lets it go in the run's own statements). They become lost, their accounts due
-- now; a worker still recording its outcome writes it over. An advisory lock on a bigint
-- shows in pg_locks as its high (classid) and low (objid) halves.
WITH lost AS (
    UPDATE invoicing_runs r SET status = 'lost', finished_at = now(), updated_at = now(),
        error = 'the worker stopped answering (killed or cut off) during the run'
    WHERE r.status = 'running' AND NOT EXISTS (
        SELECT 1 FROM pg_locks l
        WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
        AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND ((l.classid::bigint << 32) | l.objid::bigint)
            = hashtextextended('invoicing-account:' || r.account, 0))
    RETURNING r.account
), due AS (
    UPDATE invoicing_accounts SET due_at = now() WHERE name IN (SELECT account FROM lost)
)
SELECT DISTINCT account FROM lost ORDER BY account;

-- name: account_statuses
-- Every account (or the one named) with its latest run, by name.
SELECT a.name, a.host, a.due_at, r.status, r.started_at, r.finished_at, r.requests,
    r.created, r.updated, r.deleted, r.done, r.total, r.eta_seconds, r.error, r.worker,
    invoicing_failures(a.name)
FROM invoicing_accounts a LEFT JOIN LATERAL (
    SELECT * FROM invoicing_runs WHERE account = a.name ORDER BY id DESC LIMIT 1
) r ON true
WHERE %s::text IS NULL OR a.name = %s ORDER BY a.name;

-- name: queue_accounts
-- An account is queued (due_at NULL) while its job waits or runs.
UPDATE invoicing_accounts SET due_at = NULL WHERE name = ANY(%s);

-- name: due_now
UPDATE invoicing_accounts SET due_at = now() WHERE name = ANY(%s);

-- name: orphans_due
-- An account queued whose job is gone is due again: at worst a run more, never an account
-- forgotten.
UPDATE invoicing_accounts a SET due_at = now()
WHERE a.due_at IS NULL AND NOT EXISTS (
    SELECT 1 FROM procrastinate_jobs j WHERE j.task_name = %s AND (
        (j.status = 'todo' AND j.queueing_lock = a.name)
        OR (j.status = 'doing' AND j.lock = a.name)));

-- name: queue_due
UPDATE invoicing_accounts SET due_at = NULL WHERE due_at <= now() RETURNING name;

-- name: has_procrastinate
SELECT to_regclass('procrastinate_jobs') IS NOT NULL;

-- name: tune_procrastinate
-- procrastinate's fetch never plans a sequential scan (issue #48). Once VACUUM has found
-- its jobs table empty (between two bursts of runs: a small fleet's usual state), the
-- planner expects a row or so and joins the queued jobs to themselves by sequential scans,
-- for every fetch: 300 jobs queued at once cost 16 ms of PostgreSQL CPU a fetch instead
-- of 0.5. Idempotent; run by each `db migrate`.
DO $$
BEGIN
    IF to_regprocedure('procrastinate_fetch_job_v2(character varying[], bigint)') IS NOT NULL
    THEN
        ALTER FUNCTION procrastinate_fetch_job_v2(character varying[], bigint)
            SET enable_seqscan = off;
    END IF;
END
$$;

-- name: queue_jobs
-- The metrics' sync jobs waiting (todo) or running (doing).
SELECT status::text, count(*) FROM procrastinate_jobs
WHERE task_name = %s AND status IN ('todo', 'doing') GROUP BY status;

-- name: overdue
SELECT count(*) FROM invoicing_accounts WHERE due_at < now() - make_interval(secs => %s);

-- name: ping
SELECT 1;
