-- Change announcements: every write that may change what GET /v1/users/{user_id}/entitlements answers for a
-- user sends pg_notify('entitlements_changed', user_id) in the same transaction, so listeners hear of it exactly
-- when it commits (and never when it rolls back). A change that may concern every user (the catalog, a TRUNCATE)
-- sends '*'. The triggers are statement-level with transition tables: one notification per distinct user per
-- statement, and PostgreSQL folds identical notifications within a transaction into one.
--
-- How a new table joins (a table whose rows feed the entitlements document), in its own migration:
--   * rows carrying the user in a `user_id` column:  SELECT announce_changes_of('t', 'announce_users_changed');
--   * rows of a purchase (an `original_transaction_id` column, owned through purchase_owners):
--                                                     SELECT announce_changes_of('t', 'announce_purchases_changed');
--   * rows every user's answer depends on (like products): one AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
--     ... FOR EACH STATEMENT trigger on announce_everyone_changed().
--   Then add the table to ChangeNotificationTests' cases.
--
-- Tables that do not feed the document (submissions, orders, the ledger's entries, the audit log, App Store
-- notifications, webhook events…) need nothing: the rows they lead to in the tables below announce themselves.

-- The users in the statement's transition tables (`new_rows` after INSERT/UPDATE, `old_rows` after UPDATE/DELETE).
CREATE FUNCTION announce_users_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM pg_notify('entitlements_changed', user_id) FROM (SELECT DISTINCT user_id FROM new_rows) AS changed;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('entitlements_changed', user_id) FROM (SELECT DISTINCT user_id FROM old_rows) AS changed;
    END IF;
    RETURN NULL;
END $$;

-- The owners of the purchases in the statement's transition tables. A purchase without an owner announces
-- nothing: it concerns no user until purchase_owners gains its row, which announces itself.
CREATE FUNCTION announce_purchases_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        PERFORM pg_notify('entitlements_changed', user_id)
           FROM (SELECT DISTINCT o.user_id FROM new_rows JOIN purchase_owners o USING (original_transaction_id)) AS changed;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        PERFORM pg_notify('entitlements_changed', user_id)
           FROM (SELECT DISTINCT o.user_id FROM old_rows JOIN purchase_owners o USING (original_transaction_id)) AS changed;
    END IF;
    RETURN NULL;
END $$;

-- Everyone: '*'.
CREATE FUNCTION announce_everyone_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('entitlements_changed', '*');
    RETURN NULL;
END $$;

-- Creates the four triggers by which `target` announces its changes: INSERT, UPDATE and DELETE through
-- `announcer` (announce_users_changed or announce_purchases_changed), TRUNCATE to everyone.
CREATE FUNCTION announce_changes_of(target regclass, announcer text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    prefix text := (SELECT relname FROM pg_class WHERE oid = target) || '_announce_';
BEGIN
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT ON %s REFERENCING NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION %I()', prefix || 'insert', target, announcer);
    EXECUTE format('CREATE TRIGGER %I AFTER UPDATE ON %s REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION %I()', prefix || 'update', target, announcer);
    EXECUTE format('CREATE TRIGGER %I AFTER DELETE ON %s REFERENCING OLD TABLE AS old_rows '
                   'FOR EACH STATEMENT EXECUTE FUNCTION %I()', prefix || 'delete', target, announcer);
    EXECUTE format('CREATE TRIGGER %I AFTER TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION announce_everyone_changed()', prefix || 'truncate', target);
END $$;

-- Who owns a purchase (old and new owner of a moved purchase), grants, consumable balances.
SELECT announce_changes_of('purchase_owners', 'announce_users_changed');
SELECT announce_changes_of('grants', 'announce_users_changed');
SELECT announce_changes_of('consumable_balances', 'announce_users_changed');
-- App Store transactions and subscription renewal state, through the purchase's owner.
SELECT announce_changes_of('app_store_transactions', 'announce_purchases_changed');
SELECT announce_changes_of('subscriptions', 'announce_purchases_changed');

-- The catalog: every user's evaluation reads it.
CREATE TRIGGER products_announce AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON products
    FOR EACH STATEMENT EXECUTE FUNCTION announce_everyone_changed();
