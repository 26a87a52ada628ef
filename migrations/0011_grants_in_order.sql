-- Grants are kept in whole seconds, so several given in one second tied on `created_at` and came back in the
-- order of their random ids: the order they were given in breaks the tie (newest first in the customer view).
ALTER TABLE grants ADD COLUMN given_order bigint GENERATED ALWAYS AS IDENTITY;
