-- The SQLite budget store's tables (sqlite.py), made if missing on every open: our units
-- (one row each), phantom blocks (a count per return time) and each key's counts.
CREATE TABLE IF NOT EXISTS budget_units (
    key TEXT NOT NULL,
    unit TEXT NOT NULL,
    taken_at REAL NOT NULL,
    returns_at REAL NOT NULL,
    heard INTEGER, -- the server's remaining in the unit's answer
    PRIMARY KEY (key, unit)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS budget_units_returns ON budget_units (key, returns_at);
CREATE INDEX IF NOT EXISTS budget_units_taken ON budget_units (key, taken_at);

CREATE TABLE IF NOT EXISTS budget_phantoms (
    key TEXT NOT NULL,
    returns_at REAL NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (key, returns_at)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS budget_keys (
    key TEXT PRIMARY KEY,
    ours INTEGER NOT NULL DEFAULT 0,
    phantoms INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- The file's clock (sqlite.py's `_now`): the latest time any process used, so no process
-- whose clock runs ahead returns units that others took earlier; the last writer's own
-- clock, by which each process learns how far its clock runs ahead of the others'; and
-- the machine's boot with the offset from its steady clock to the file's time (files
-- made before had `budget_clock`, timed by the wall clock: left unused).
CREATE TABLE IF NOT EXISTS budget_time (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    now REAL NOT NULL,
    clock REAL NOT NULL,
    writer TEXT NOT NULL,
    boot TEXT NOT NULL,
    base REAL NOT NULL
)
