-- StoreKit 2: users' app account tokens, signed statements with their dates, refund reversals, and App Store
-- notifications stored before they are answered and applied once, in order, when their purchase has an owner.

-- One stable appAccountToken per user (GET /v1/users/{user_id}/app-account-token): unique per user and per token,
-- so concurrent first calls agree on one.
CREATE TABLE app_account_tokens (
    user_id            text PRIMARY KEY,
    app_account_token  uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    created_at         timestamptz NOT NULL DEFAULT now()
);

-- A signed statement of a transaction (a signed transaction, a notification) is Apple's whole view of it at its
-- signedDate: the newest one decides its refund state and expiry. NULL while only receipts spoke of it.
ALTER TABLE app_store_transactions ADD COLUMN signed_date timestamptz;

-- Renewal state carries the signedDate of the payload it came in (receipts and refreshes: the time recorded);
-- older never overwrites newer.
ALTER TABLE subscriptions ADD COLUMN renewal_signed_date timestamptz;

-- A refund reversed credits a consumable's refund debit back, once per transaction.
ALTER TABLE consumable_ledger DROP CONSTRAINT consumable_ledger_kind_check;
ALTER TABLE consumable_ledger ADD CONSTRAINT consumable_ledger_kind_check
    CHECK (kind IN ('credit', 'consume', 'refund', 'refund_reversal'));

-- Every App Store notification, stored before the answer (200 means durable), once per notification_uuid
-- (V2: Apple's notificationUUID; V1: 'v1:' and the SHA-256 of the body). `received` ones are applied by the
-- request that stored them or, failing that, by the apply worker; `parked` ones wait for their purchase's owner.
CREATE TABLE app_store_notifications (
    notification_id          bigserial PRIMARY KEY,
    notification_uuid        text NOT NULL UNIQUE,
    version                  smallint NOT NULL CHECK (version IN (1, 2)),
    notification_type        text NOT NULL,
    subtype                  text,
    signed_date              timestamptz NOT NULL,
    received_at              timestamptz NOT NULL DEFAULT now(),
    environment              text,
    original_transaction_id  text,
    transaction_id           text,
    user_id                  text,
    state                    text NOT NULL DEFAULT 'received' CHECK (state IN ('received', 'applied', 'parked', 'ignored')),
    -- V2: the signedPayload as received (verified); V1: the body without its password.
    signed_payload           text NOT NULL,
    -- V2: the verified payloads of data.signedTransactionInfo and data.signedRenewalInfo, as signed.
    transaction_info         jsonb,
    renewal_info             jsonb,
    attempts                 integer NOT NULL DEFAULT 0,
    next_attempt_at          timestamptz NOT NULL DEFAULT now(),
    last_error               text,
    applied_at               timestamptz,
    updated_at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX app_store_notifications_due ON app_store_notifications (next_attempt_at) WHERE state = 'received';
CREATE INDEX app_store_notifications_parked ON app_store_notifications (original_transaction_id, signed_date) WHERE state = 'parked';
CREATE INDEX app_store_notifications_newest ON app_store_notifications (received_at DESC, notification_id DESC);

-- Serialises, per purchase, everything that decides or uses its owner: recordings (which may claim it and then
-- apply its parked notifications) and notification applications (which may park). Locks are taken in one order
-- (by key), so two callers locking several purchases cannot deadlock. Two-key advisory locks under class
-- 'purc' (0x70757263), apart from the migrator's one-key lock.
CREATE FUNCTION lock_purchases(original_transaction_ids text[]) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    key integer;
BEGIN
    FOR key IN SELECT DISTINCT hashtext(id) FROM unnest(original_transaction_ids) AS id ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(1886745187, key);
    END LOOP;
END
$$;
