-- `raw` keeps every document's exact bytes, as the service sent them, and the store reads
-- them from there. jsonb is for SQL only: it rewrites what it holds (numbers: -0.0 reads
-- as 0.0 and 1E+2 as 100; keys sorted, duplicates dropped, escapes decoded), so a mirror
-- read back from jsonb would not give back what the service sent. Rows written before
-- this version keep raw NULL where the document was jsonb alone: their bytes are gone,
-- and they are read from jsonb as before. invoicing_raw_v1 stays for a process of the
-- previous version still running while this one is applied (it refuses the database
-- when it next opens it).

COMMENT ON COLUMN invoicing_invoices.raw IS
    'the document''s exact bytes as the service sent them; what the store reads back';
