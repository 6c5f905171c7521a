-- The shared budget's ledger: units taken per key, and the PL/pgSQL that takes and
-- settles them in one round trip. Each function takes the key's advisory lock
-- (hashtextextended('invoicing-budget:' || key, 0): locks.BUDGET_KEY).
-- Versioned names: a newer release adds _v2 functions beside these instead of changing
-- them under processes that still run the old code. IF NOT EXISTS / OR REPLACE: older
-- releases made these without recording a version.
CREATE TABLE IF NOT EXISTS invoicing_budget_units (
    key text NOT NULL,
    unit text NOT NULL,
    taken_at double precision NOT NULL,
    returns_at double precision NOT NULL,
    PRIMARY KEY (key, unit)
);

CREATE OR REPLACE FUNCTION invoicing_budget_view_v1(p_key text, p_now double precision)
RETURNS TABLE (o_returns_in double precision[], o_phantoms int)
LANGUAGE sql AS $$
    SELECT coalesce(array_agg(u.returns_at - p_now ORDER BY u.returns_at), '{}'),
           (count(*) FILTER (WHERE u.unit LIKE 'p%'))::int
    FROM invoicing_budget_units u WHERE u.key = p_key
$$;

CREATE OR REPLACE FUNCTION invoicing_budget_take_v1(
    p_key text, p_limit int, p_period double precision, p_hold double precision,
    p_keep int, p_unit text)
RETURNS TABLE (o_granted boolean, o_taken_at double precision, o_wait double precision,
               o_returns_in double precision[], o_phantoms int)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision;
    v_in_use int;
    v_at double precision;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('invoicing-budget:' || p_key, 0));
    v_now := extract(epoch FROM clock_timestamp());
    DELETE FROM invoicing_budget_units u WHERE u.key = p_key AND u.returns_at <= v_now;
    SELECT count(*) INTO v_in_use FROM invoicing_budget_units u WHERE u.key = p_key;
    o_taken_at := v_now;
    IF p_limit - v_in_use > p_keep THEN
        INSERT INTO invoicing_budget_units VALUES (p_key, p_unit, v_now, v_now + p_period + p_hold);
        o_granted := true;
        o_wait := 0;
    ELSE
        SELECT u.returns_at INTO v_at FROM invoicing_budget_units u WHERE u.key = p_key
            ORDER BY u.returns_at OFFSET v_in_use - (p_limit - p_keep - 1) - 1 LIMIT 1;
        o_granted := false;
        o_wait := greatest(0, coalesce(v_at, v_now + p_period) - v_now);
    END IF;
    SELECT v.o_returns_in, v.o_phantoms INTO o_returns_in, o_phantoms
        FROM invoicing_budget_view_v1(p_key, v_now) v;
    RETURN NEXT;
END
$$;

CREATE OR REPLACE FUNCTION invoicing_budget_settle_v1(
    p_key text, p_limit int, p_period double precision, p_unit text,
    p_taken_at double precision, p_sent boolean, p_remaining int)
RETURNS TABLE (o_returns_in double precision[], o_phantoms int)
LANGUAGE plpgsql AS $$
DECLARE
    v_now double precision;
    v_after int;
    v_allowed int;
    v_free int;
    v_burn int;
    v_min_real double precision;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('invoicing-budget:' || p_key, 0));
    v_now := extract(epoch FROM clock_timestamp());
    DELETE FROM invoicing_budget_units u WHERE u.key = p_key AND u.returns_at <= v_now;
    IF NOT p_sent THEN
        DELETE FROM invoicing_budget_units u WHERE u.key = p_key AND u.unit = p_unit;
    ELSE
        UPDATE invoicing_budget_units u SET returns_at = least(u.returns_at, v_now + p_period)
            WHERE u.key = p_key AND u.unit = p_unit;
        IF p_remaining IS NOT NULL THEN
            SELECT count(*) INTO v_after FROM invoicing_budget_units u
                WHERE u.key = p_key AND u.unit LIKE 'r%' AND u.taken_at >= p_taken_at
                    AND u.unit <> p_unit;
            v_allowed := p_remaining - v_after;
            SELECT p_limit - count(*) INTO v_free FROM invoicing_budget_units u
                WHERE u.key = p_key;
            IF v_free > v_allowed THEN
                v_burn := v_free - greatest(0, v_allowed);
                IF v_allowed > 0 THEN
                    INSERT INTO invoicing_budget_units
                        SELECT p_key, 'p' || gen_random_uuid(), v_now, v_now + p_period
                        FROM generate_series(1, v_burn);
                ELSE
                    SELECT min(u.returns_at) INTO v_min_real FROM invoicing_budget_units u
                        WHERE u.key = p_key AND u.unit LIKE 'r%';
                    IF v_min_real IS NOT NULL THEN
                        INSERT INTO invoicing_budget_units
                            SELECT p_key, 'p' || gen_random_uuid(), v_now, v_min_real + p_period
                            FROM generate_series(1, v_burn);
                    ELSE
                        INSERT INTO invoicing_budget_units
                            SELECT p_key, 'p' || gen_random_uuid(), v_now,
                                   v_now + CASE WHEN g = 1 THEN 1 ELSE 2 END * p_period
                            FROM generate_series(1, v_burn) g;
                    END IF;
                END IF;
            ELSIF v_free < v_allowed THEN
                DELETE FROM invoicing_budget_units d WHERE d.key = p_key AND d.unit IN (
                    SELECT u.unit FROM invoicing_budget_units u
                    WHERE u.key = p_key AND u.unit LIKE 'p%'
                    ORDER BY u.returns_at DESC LIMIT v_allowed - v_free);
            END IF;
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM invoicing_budget_view_v1(p_key, v_now);
END
$$;
