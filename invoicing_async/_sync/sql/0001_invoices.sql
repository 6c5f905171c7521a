-- Invoices with tombstones, and the pending plan, keyed by account (PostgresStore).
--
-- The document is jsonb, so that SQL can query the mirror (SELECT document->>'state' …).
-- `raw` keeps every document's exact bytes, as the service sent them, and the store reads
-- them from there: jsonb rewrites what it holds (numbers: -0.0 reads as 0.0 and 1E+2 as
-- 100; keys sorted, duplicates dropped; a NUL reads as the six characters \u0000), so a
-- mirror read back from jsonb would not give back what the service sent.
CREATE TABLE invoicing_invoices (
    account text NOT NULL,
    id bigint NOT NULL,
    revision bigint NOT NULL,
    invoice_number text,
    state text,
    contact_id bigint,
    document jsonb NOT NULL,
    raw bytea NOT NULL,
    synced_at timestamptz NOT NULL,
    deleted_at timestamptz,
    PRIMARY KEY (account, id)
);
CREATE INDEX invoicing_invoices_number ON invoicing_invoices (account, invoice_number);
CREATE INDEX invoicing_invoices_state ON invoicing_invoices (account, state);
CREATE INDEX invoicing_invoices_contact_state
    ON invoicing_invoices (account, contact_id, state);
CREATE TABLE invoicing_pending (
    account text NOT NULL,
    id bigint NOT NULL,
    revision bigint NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    quarantined boolean NOT NULL DEFAULT false,
    since double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (account, id)
);

-- A document ({"invoice": {…}}) as the invoice's jsonb object, so that document->>'state'
-- reads the state. Each \u0000 escape becomes the escaped text "\\u0000" (an escape is
-- one preceded by an even number of backslashes: \\u0000 is text already).
CREATE OR REPLACE FUNCTION invoicing_document_v1(p_document bytea) RETURNS jsonb
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT coalesce(j->'invoice', j) FROM (
        SELECT CASE WHEN strpos(t, '\u0000') = 0 THEN t::jsonb
                    ELSE regexp_replace(t, '(?<!\\)((?:\\\\)*)\\u0000', '\1\\\\u0000', 'g')::jsonb
               END AS j
        FROM convert_from(p_document, 'UTF8') AS t
    ) AS parsed
$$;

COMMENT ON COLUMN invoicing_invoices.raw IS
    'the document''s exact bytes as the service sent them; what the store reads back';
