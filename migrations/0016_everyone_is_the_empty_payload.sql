-- A change that may concern every user (the catalog, a TRUNCATE) is announced with the empty payload, not '*':
-- '*' is a valid user id, and a change to that user emptied every instance's entitlement cache. No user id is
-- empty. (During a rolling deploy a process still running the older code reads '' as a user of that name and does
-- not empty its cache for such a change; it serves what it cached until its own entries expire or it is replaced.)
CREATE OR REPLACE FUNCTION announce_everyone_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('entitlements_changed', '');
    RETURN NULL;
END $$;
