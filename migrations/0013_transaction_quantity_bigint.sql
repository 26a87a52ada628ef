-- Apple's `quantity` is stored as given: a value past 32 bits (no store sells one, but a payload may say so)
-- failed the whole recording, and its submission was retried without end; its credit is refused in Swift
-- (`ConsumableCredit.maximum`), the transaction itself is a fact like any other.
ALTER TABLE app_store_transactions ALTER COLUMN quantity TYPE bigint;
