-- Each catalog price from when it was set, so reports count a purchase at the price in force when it was made: a
-- price changed later (or moved to another currency) does not rewrite past revenue. A product's first price applies
-- to every purchase before it too (valid_from '-infinity'): nothing earlier is known. A price removed is a row
-- without one. The prices stored now are the first of their products.
CREATE TABLE product_prices (
    product_id     text NOT NULL REFERENCES products (product_id),
    valid_from     timestamptz NOT NULL,
    price          text,
    price_currency text,
    PRIMARY KEY (product_id, valid_from),
    CHECK ((price IS NULL) = (price_currency IS NULL))
);
INSERT INTO product_prices (product_id, valid_from, price, price_currency)
SELECT product_id, '-infinity', price, price_currency FROM products WHERE price IS NOT NULL;

-- Kept by the table itself, whoever writes a price: the service, or an instance of an earlier release still running
-- beside it during a deploy (or after a rollback), which knows nothing of this table.
CREATE FUNCTION record_product_price() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.price IS NOT DISTINCT FROM OLD.price AND NEW.price_currency IS NOT DISTINCT FROM OLD.price_currency THEN
        RETURN NULL;
    END IF;
    IF NEW.price IS NULL AND NOT EXISTS (SELECT 1 FROM product_prices WHERE product_id = NEW.product_id) THEN
        RETURN NULL;
    END IF;
    INSERT INTO product_prices (product_id, valid_from, price, price_currency)
    VALUES (NEW.product_id,
            CASE WHEN EXISTS (SELECT 1 FROM product_prices WHERE product_id = NEW.product_id AND price IS NOT NULL)
                 THEN now() ELSE '-infinity' END,
            NEW.price, NEW.price_currency)
    ON CONFLICT (product_id, valid_from) DO UPDATE SET price = EXCLUDED.price, price_currency = EXCLUDED.price_currency;
    RETURN NULL;
END $$;
CREATE TRIGGER products_price_history AFTER INSERT OR UPDATE OF price, price_currency ON products
    FOR EACH ROW EXECUTE FUNCTION record_product_price();
