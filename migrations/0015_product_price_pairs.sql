-- A price is an amount of a currency: the catalog refuses one without the other, and so does the table. A price
-- stored before without its currency (or a currency without a price) was never usable in a report, which sums
-- prices per currency; both are cleared, and the product's entitlements are untouched.
UPDATE products SET price = NULL, price_currency = NULL WHERE (price IS NULL) <> (price_currency IS NULL);
ALTER TABLE products ADD CONSTRAINT products_price_has_currency CHECK ((price IS NULL) = (price_currency IS NULL));
