-- The catalog's revision: one row, bumped in the transaction of every statement that changes `products`, so a
-- writing transaction can tell whether the catalog it holds in memory is the one in force. Writers evaluate users
-- under a shared hold of the catalog (an advisory lock) and read the revision under it; a catalog change takes that
-- lock exclusively, so no user is evaluated with a catalog a concurrent change is replacing.
CREATE TABLE catalog_revision (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    revision   bigint NOT NULL
);
INSERT INTO catalog_revision (revision) VALUES (1);

CREATE FUNCTION bump_catalog_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE catalog_revision SET revision = revision + 1;
    RETURN NULL;
END $$;

CREATE TRIGGER products_revision AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON products
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_revision();

-- Who owns a product, for the events of a catalog change.
CREATE INDEX app_store_transactions_product ON app_store_transactions (product_id);

-- A catalog change that alters what a product unlocks marks its owners' heads in its own transaction: due now
-- (`next_change_at`) and naming the product here ('' when several products' changes wait), so the expiration
-- worker, or the next write to the user, evaluates them with the new catalog and writes their `catalog_change`
-- events. Cleared when the head is next written.
ALTER TABLE user_event_heads ADD COLUMN pending_catalog_change text;
