-- The view every take and settle answers with, in PL/pgSQL: a SQL function that cannot be
-- inlined (this one, called from PL/pgSQL) is planned anew at each call, where PL/pgSQL
-- keeps the plans of its statements for the session. The same answer as 0001's.
CREATE OR REPLACE FUNCTION invoicing_budget_view(p_key text, p_now double precision,
    OUT o_in_use int, OUT o_phantoms int, OUT o_next_in double precision)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT k.ours + k.phantoms, k.phantoms,
           least((SELECT min(u.returns_at) FROM invoicing_budget_units u WHERE u.key = p_key),
                 (SELECT min(p.returns_at) FROM invoicing_budget_phantoms p
                  WHERE p.key = p_key)) - p_now
    INTO o_in_use, o_phantoms, o_next_in
    FROM invoicing_budget_keys k WHERE k.key = p_key;
END
$$;
