-- SQLiteStore's tables (sqlite.py), made if missing on every open.
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS invoices (
    id INTEGER PRIMARY KEY,
    revision INTEGER NOT NULL,
    invoice_number TEXT,
    state TEXT,
    contact_id INTEGER,
    document BLOB NOT NULL,
    synced_at TEXT NOT NULL,
    deleted_at TEXT
);
CREATE INDEX IF NOT EXISTS invoices_number ON invoices (invoice_number);
CREATE INDEX IF NOT EXISTS invoices_state ON invoices (state);
CREATE INDEX IF NOT EXISTS invoices_contact ON invoices (contact_id);
CREATE TABLE IF NOT EXISTS pending (
    id INTEGER PRIMARY KEY,
    revision INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    quarantined INTEGER NOT NULL DEFAULT 0,
    since REAL NOT NULL DEFAULT 0
);
