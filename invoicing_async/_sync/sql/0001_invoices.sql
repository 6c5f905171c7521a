-- Invoices with tombstones, and the pending plan, keyed by account (PostgresStore).
CREATE TABLE invoicing_invoices (
    account text NOT NULL,
    id bigint NOT NULL,
    revision bigint NOT NULL,
    invoice_number text,
    state text,
    contact_id bigint,
    document bytea NOT NULL,
    synced_at timestamptz NOT NULL,
    deleted_at timestamptz,
    PRIMARY KEY (account, id)
);
CREATE INDEX invoicing_invoices_number ON invoicing_invoices (account, invoice_number);
CREATE INDEX invoicing_invoices_state ON invoicing_invoices (account, state);
CREATE INDEX invoicing_invoices_contact ON invoicing_invoices (account, contact_id);
CREATE TABLE invoicing_pending (
    account text NOT NULL,
    id bigint NOT NULL,
    revision bigint NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    quarantined boolean NOT NULL DEFAULT false,
    since double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (account, id)
);
