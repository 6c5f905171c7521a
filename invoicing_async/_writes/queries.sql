-- The journal's statements, shared by SQLite and PostgreSQL (placeholders written `?`,
-- turned into `%s` for psycopg).

-- name: select_record
SELECT scope, key, kind, target, fingerprint, detail, at, since_id, state, owner, lease_until,
       result, result_id
FROM invoicing_writes WHERE scope = ? AND key = ?;

-- name: lock_record
SELECT scope, key, kind, target, fingerprint, detail, at, since_id, state, owner, lease_until,
       result, result_id
FROM invoicing_writes WHERE scope = ? AND key = ? FOR UPDATE;

-- name: high_water
SELECT max(result_id) FROM invoicing_writes WHERE scope = ? AND kind = 'create_invoice';

-- name: insert_intent
INSERT INTO invoicing_writes
    (scope, key, kind, target, fingerprint, detail, at, since_id, state, owner, lease_until)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)
ON CONFLICT DO NOTHING;

-- name: take_over
UPDATE invoicing_writes SET owner = ?, lease_until = ? WHERE scope = ? AND key = ?;

-- name: applied
UPDATE invoicing_writes SET state = 'applied', result = ?, result_id = ?, lease_until = 0
WHERE scope = ? AND key = ? AND owner = ?;

-- name: release
DELETE FROM invoicing_writes WHERE scope = ? AND key = ? AND owner = ? AND state = 'pending';

-- name: expire
UPDATE invoicing_writes SET lease_until = 0 WHERE scope = ? AND key = ? AND owner = ?;

-- name: pending
SELECT scope, key, kind, target, fingerprint, detail, at, since_id, state, owner, lease_until,
       result, result_id
FROM invoicing_writes WHERE scope = ? AND state = 'pending';
