-- The write journal (journal.py): one row per idempotency key, the intent recorded before
-- the write is sent and its outcome after.
CREATE TABLE IF NOT EXISTS invoicing_writes (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    target BIGINT,
    fingerprint TEXT NOT NULL,
    detail TEXT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    since_id BIGINT,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    lease_until DOUBLE PRECISION NOT NULL,
    result BYTEA,
    result_id BIGINT,
    PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS invoicing_writes_created ON invoicing_writes (scope, kind, result_id);
CREATE INDEX IF NOT EXISTS invoicing_writes_pending ON invoicing_writes (scope, state);
