-- SQLiteJournal's table (journal.py), made if missing on every open.
CREATE TABLE IF NOT EXISTS invoicing_writes (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    kind TEXT NOT NULL,
    target INTEGER,
    fingerprint TEXT NOT NULL,
    detail TEXT NOT NULL,
    at REAL NOT NULL,
    since_id INTEGER,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    lease_until REAL NOT NULL,
    result BLOB,
    result_id INTEGER,
    PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS invoicing_writes_created ON invoicing_writes (scope, kind, result_id);
CREATE INDEX IF NOT EXISTS invoicing_writes_pending ON invoicing_writes (scope, state);
