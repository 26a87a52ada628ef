-- A consumable's amount is at most 10^12, the largest credit one transaction may make: the recorder never credited
-- a purchase of a larger amount (it logged consumable_credit_refused), so such an amount is lowered to the limit,
-- and the table refuses a larger one from now on.
UPDATE products SET amount = 1000000000000 WHERE amount > 1000000000000;
ALTER TABLE products ADD CONSTRAINT products_amount_limit CHECK (amount <= 1000000000000);
