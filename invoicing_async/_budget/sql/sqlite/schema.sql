-- The SQLite budget store's table (sqlite.py), made if missing on every open.
CREATE TABLE IF NOT EXISTS budget_units (
    key TEXT NOT NULL,
    unit TEXT NOT NULL,
    taken_at REAL NOT NULL,
    returns_at REAL NOT NULL,
    PRIMARY KEY (key, unit)
) WITHOUT ROWID
