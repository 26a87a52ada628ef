-- Webhook events: one per change of a user's entitlements or balances, written in the change's own
-- transaction, and their delivery to WEBHOOK_URL.

-- One row per user whose state was ever written: the last event's sequence, the state (entitlements and
-- consumables, as GET entitlements shows them) that the last write left, and when that state next changes with
-- time alone (the expiration worker's queue). Every transaction that changes a user's state locks the user's
-- row here first, so a user's changes, sequence numbers and states follow one another.
CREATE TABLE user_event_heads (
    user_id         text PRIMARY KEY,
    last_sequence   bigint NOT NULL DEFAULT 0,
    state           jsonb,
    next_change_at  timestamptz,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX user_event_heads_due ON user_event_heads (next_change_at) WHERE next_change_at IS NOT NULL;

-- Each event with the body exactly as sent (signed and POSTed byte for byte), and its delivery.
-- position orders events newest first across users; sequence grows by one per user.
CREATE TABLE webhook_events (
    event_id              uuid PRIMARY KEY,
    position              bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    user_id               text NOT NULL,
    sequence              bigint NOT NULL CHECK (sequence > 0),
    type                  text NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    payload               text NOT NULL,
    delivery_status       text NOT NULL CHECK (delivery_status IN ('none', 'pending', 'delivered', 'failed')),
    attempts              integer NOT NULL DEFAULT 0,
    -- when the current round of attempts began (the event's creation, or a redelivery): the retry window's start
    pending_since         timestamptz,
    next_attempt_at       timestamptz,
    -- the lease of the instance sending it now: nobody else sends it until claimed_until passes
    claim_id              uuid,
    claimed_until         timestamptz,
    last_attempt_at       timestamptz,
    last_response_status  integer,
    last_error            text,
    delivered_at          timestamptz,
    UNIQUE (user_id, sequence),
    CHECK ((delivery_status = 'pending') = (next_attempt_at IS NOT NULL))
);
CREATE INDEX webhook_events_due ON webhook_events (next_attempt_at) WHERE delivery_status = 'pending';
CREATE INDEX webhook_events_by_status ON webhook_events (delivery_status, position);
CREATE INDEX webhook_events_by_user ON webhook_events (user_id, position);

-- New pending events wake every process's dispatcher at commit (they poll as well, for retries coming due).
CREATE FUNCTION announce_webhook_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM new_rows WHERE delivery_status = 'pending') THEN
        PERFORM pg_notify('webhook_events', '');
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER webhook_events_announce AFTER INSERT ON webhook_events REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION announce_webhook_events();

-- Users who had purchases, grants or balances before events existed: the expiration worker records their state
-- (without an event) at once, and follows them from then on.
INSERT INTO user_event_heads (user_id, next_change_at)
SELECT user_id, now() FROM (SELECT user_id FROM purchase_owners UNION SELECT user_id FROM grants
                            UNION SELECT user_id FROM consumable_balances) AS users
ON CONFLICT (user_id) DO NOTHING;
