-- The shared budget's ledger (ledger.py's rule) and the PL/pgSQL that takes and settles
-- its units in one round trip. Our units are a row each, phantoms a row per block (a
-- count per return time), and each key's counts a row, so a call reads no more rows
-- however many units are held. Each function takes the key's advisory lock
-- (hashtextextended('invoicing-budget:' || key, 0): locks.BUDGET_KEY).
CREATE TABLE IF NOT EXISTS invoicing_budget_units (
    key text NOT NULL,
    unit text NOT NULL,
    taken_at double precision NOT NULL,
    returns_at double precision NOT NULL,
    heard int, -- the server's remaining in the unit's answer
    PRIMARY KEY (key, unit)
);
CREATE INDEX IF NOT EXISTS invoicing_budget_units_returns ON invoicing_budget_units (key, returns_at);
CREATE INDEX IF NOT EXISTS invoicing_budget_units_taken ON invoicing_budget_units (key, taken_at);

CREATE TABLE IF NOT EXISTS invoicing_budget_phantoms (
    key text NOT NULL,
    returns_at double precision NOT NULL,
    count int NOT NULL,
    PRIMARY KEY (key, returns_at)
);

CREATE TABLE IF NOT EXISTS invoicing_budget_keys (
    key text PRIMARY KEY,
    ours int NOT NULL DEFAULT 0,
    phantoms int NOT NULL DEFAULT 0
);

-- Lock the key, forget what came back, and return the time and the key's counts.
CREATE OR REPLACE FUNCTION invoicing_budget_begin(p_key text,
    OUT o_now double precision, OUT o_ours int, OUT o_phantoms int)
LANGUAGE plpgsql AS $$
DECLARE
    v_gone int;
    v_due int;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('invoicing-budget:' || p_key, 0));
    o_now := extract(epoch FROM clock_timestamp());
    INSERT INTO invoicing_budget_keys (key) VALUES (p_key) ON CONFLICT (key) DO NOTHING;
    DELETE FROM invoicing_budget_units u WHERE u.key = p_key AND u.returns_at <= o_now;
    GET DIAGNOSTICS v_gone = ROW_COUNT;
    WITH gone AS (
        DELETE FROM invoicing_budget_phantoms p WHERE p.key = p_key AND p.returns_at <= o_now
        RETURNING p.count)
    SELECT coalesce(sum(gone.count), 0) INTO v_due FROM gone;
    UPDATE invoicing_budget_keys k SET ours = k.ours - v_gone, phantoms = k.phantoms - v_due
        WHERE k.key = p_key RETURNING k.ours, k.phantoms INTO o_ours, o_phantoms;
END
$$;

-- What every call answers: units out, phantoms among them, seconds to the next return.
CREATE OR REPLACE FUNCTION invoicing_budget_view(p_key text, p_now double precision,
    OUT o_in_use int, OUT o_phantoms int, OUT o_next_in double precision)
LANGUAGE sql AS $$
    SELECT k.ours + k.phantoms, k.phantoms,
           least((SELECT min(u.returns_at) FROM invoicing_budget_units u WHERE u.key = p_key),
                 (SELECT min(p.returns_at) FROM invoicing_budget_phantoms p
                  WHERE p.key = p_key)) - p_now
    FROM invoicing_budget_keys k WHERE k.key = p_key
$$;

-- A block of `p_count` phantoms back at `p_at` (none when `p_count` is not positive).
CREATE OR REPLACE FUNCTION invoicing_budget_add_phantoms(p_key text, p_at double precision, p_count int)
RETURNS void LANGUAGE sql AS $$
    INSERT INTO invoicing_budget_phantoms AS p SELECT p_key, p_at, p_count WHERE p_count > 0
        ON CONFLICT (key, returns_at) DO UPDATE SET count = p.count + excluded.count;
    UPDATE invoicing_budget_keys k SET phantoms = k.phantoms + p_count
        WHERE k.key = p_key AND p_count > 0;
$$;

CREATE OR REPLACE FUNCTION invoicing_budget_take(
    p_key text, p_limit int, p_period double precision, p_hold double precision,
    p_keep int, p_unit text)
RETURNS TABLE (o_granted boolean, o_taken_at double precision, o_wait double precision,
               o_in_use int, o_phantoms int, o_next_in double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision;
    v_ours int;
    v_phantoms int;
    v_needed int;
    v_seen int := 0;
    v_at double precision;
    r record;
BEGIN
    SELECT * INTO v_now, v_ours, v_phantoms FROM invoicing_budget_begin(p_key);
    o_taken_at := v_now;
    o_granted := p_limit - v_ours - v_phantoms > p_keep;
    o_wait := 0;
    IF o_granted THEN
        INSERT INTO invoicing_budget_units
            VALUES (p_key, p_unit, v_now, v_now + p_period + p_hold, NULL);
        UPDATE invoicing_budget_keys k SET ours = k.ours + 1 WHERE k.key = p_key;
    ELSE
        -- Units that must come back before more than `keep` are free.
        v_needed := v_ours + v_phantoms - (p_limit - p_keep - 1);
        v_at := v_now + p_period;
        FOR r IN SELECT u.returns_at AS at, 1 AS n FROM invoicing_budget_units u
                     WHERE u.key = p_key
                 UNION ALL SELECT p.returns_at, p.count FROM invoicing_budget_phantoms p
                     WHERE p.key = p_key
                 ORDER BY 1 LOOP
            v_seen := v_seen + r.n;
            IF v_seen >= v_needed THEN
                v_at := r.at;
                EXIT;
            END IF;
        END LOOP;
        o_wait := greatest(0, v_at - v_now);
    END IF;
    SELECT * INTO o_in_use, o_phantoms, o_next_in FROM invoicing_budget_view(p_key, v_now);
    RETURN NEXT;
END
$$;

-- Settle a unit and heed the server's remaining (ledger.py's settle and heed_server);
-- with an unknown unit and no remaining, only forgets what came back (the view).
CREATE OR REPLACE FUNCTION invoicing_budget_settle(
    p_key text, p_limit int, p_period double precision, p_unit text,
    p_taken_at double precision, p_sent boolean, p_remaining int)
RETURNS TABLE (o_in_use int, o_phantoms int, o_next_in double precision)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision;
    v_ours int;
    v_phantoms int;
    v_free int;
    v_allowed int;
    v_count int;
    v_soonest double precision;
    v_give int;
    r record;
BEGIN
    SELECT * INTO v_now, v_ours, v_phantoms FROM invoicing_budget_begin(p_key);
    IF NOT p_sent THEN
        DELETE FROM invoicing_budget_units u WHERE u.key = p_key AND u.unit = p_unit;
        IF FOUND THEN
            UPDATE invoicing_budget_keys k SET ours = k.ours - 1 WHERE k.key = p_key;
        END IF;
    ELSE
        UPDATE invoicing_budget_units u
            SET returns_at = least(u.returns_at, v_now + p_period), heard = p_remaining
            WHERE u.key = p_key AND u.unit = p_unit;
        v_free := p_limit - v_ours - v_phantoms;
        IF p_remaining IS NOT NULL AND (v_phantoms > 0 OR v_free > p_remaining - v_ours) THEN
            -- Taken after and not counted first by the server's word (ledger.py's heed_server).
            SELECT p_remaining - count(*) INTO v_allowed FROM invoicing_budget_units u
                WHERE u.key = p_key AND u.taken_at > p_taken_at
                AND coalesce(u.heard, p_remaining) <= p_remaining;
            IF v_free > v_allowed THEN
                v_count := v_free - greatest(0, v_allowed);
                IF v_allowed > 0 THEN
                    PERFORM invoicing_budget_add_phantoms(p_key, v_now + p_period, v_count);
                ELSE
                    SELECT min(u.returns_at) INTO v_soonest FROM invoicing_budget_units u
                        WHERE u.key = p_key;
                    IF v_soonest IS NOT NULL THEN
                        PERFORM invoicing_budget_add_phantoms(
                            p_key, v_soonest + p_period, v_count);
                    ELSE
                        PERFORM invoicing_budget_add_phantoms(p_key, v_now + p_period, 1);
                        PERFORM invoicing_budget_add_phantoms(
                            p_key, v_now + 2 * p_period, v_count - 1);
                    END IF;
                END IF;
            ELSIF v_free < v_allowed THEN
                v_give := v_allowed - v_free;
                FOR r IN SELECT p.returns_at, p.count FROM invoicing_budget_phantoms p
                         WHERE p.key = p_key ORDER BY p.returns_at DESC LOOP
                    EXIT WHEN v_give <= 0;
                    v_count := least(r.count, v_give);
                    UPDATE invoicing_budget_phantoms p SET count = p.count - v_count
                        WHERE p.key = p_key AND p.returns_at = r.returns_at;
                    UPDATE invoicing_budget_keys k SET phantoms = k.phantoms - v_count
                        WHERE k.key = p_key;
                    v_give := v_give - v_count;
                END LOOP;
                DELETE FROM invoicing_budget_phantoms p WHERE p.key = p_key AND p.count <= 0;
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM invoicing_budget_view(p_key, v_now);
END
$$;
