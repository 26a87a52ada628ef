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
