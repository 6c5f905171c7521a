-- The SQLite budget store's table (sqlite.py), made if missing on every open.
CREATE TABLE IF NOT EXISTS budget_units (
    key TEXT NOT NULL,
    unit TEXT NOT NULL,
    taken_at REAL NOT NULL,
    returns_at REAL NOT NULL,
    PRIMARY KEY (key, unit)
) WITHOUT ROWID
;

-- The file's clock: the latest time any process used (sqlite.py's `_now`), so no process
-- whose clock runs ahead returns units that others took earlier.
CREATE TABLE IF NOT EXISTS budget_clock (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    now REAL NOT NULL
)
