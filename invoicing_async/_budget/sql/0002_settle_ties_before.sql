-- Settling v2: requests taken at the same instant as the settled one count as before it
-- (counted in the server's remaining), as ledger.py's heed_server says. Beside v1, which
-- processes of older releases still call.
CREATE OR REPLACE FUNCTION invoicing_budget_settle_v2(
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
                WHERE u.key = p_key AND u.unit LIKE 'r%' AND u.taken_at > p_taken_at
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
