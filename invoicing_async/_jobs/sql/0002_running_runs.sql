-- The runs still running, for the check that closes those whose worker is gone.
CREATE INDEX IF NOT EXISTS invoicing_runs_running ON invoicing_runs (account)
WHERE status = 'running';
