-- The whole store of the service. Correctness lives here: every "once" of the contract is a unique key.

-- The product catalog: PRODUCTS_FILE upserted at start, editable through the admin API.
CREATE TABLE products (
    product_id          text PRIMARY KEY CHECK (length(product_id) BETWEEN 1 AND 255),
    type                text NOT NULL CHECK (type IN ('consumable', 'non_consumable', 'auto_renewable', 'non_renewing')),
    entitlements        text[] NOT NULL DEFAULT '{}',
    duration            text,
    currency            text,
    amount              bigint,
    price               text,
    price_currency      text,
    subscription_group  text,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK (type <> 'non_renewing' OR duration IS NOT NULL),
    CHECK (type <> 'consumable' OR (currency IS NOT NULL AND amount > 0))
);

-- Every receipt a client posted, stored before Apple is asked. A row leaves 'pending'/'failed' only when
-- Apple gave a final answer; until then the retry worker keeps claiming it.
CREATE TABLE receipt_submissions (
    verification_id  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id          text NOT NULL,
    receipt_data     text NOT NULL,
    receipt_sha256   bytea NOT NULL,
    order_id         uuid,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'verified', 'invalid', 'failed')),
    apple_status     integer,
    environment      text CHECK (environment IN ('Production', 'Sandbox')),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    claimed_until    timestamptz,
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    resolved_at      timestamptz
);
-- Identical submissions still in flight are one submission.
CREATE UNIQUE INDEX receipt_submissions_in_flight ON receipt_submissions (user_id, receipt_sha256)
    WHERE status IN ('pending', 'failed');
CREATE INDEX receipt_submissions_due ON receipt_submissions (next_attempt_at)
    WHERE status IN ('pending', 'failed');

-- Who owns a purchase: every transaction sharing an original_transaction_id belongs to one user.
CREATE TABLE purchase_owners (
    original_transaction_id  text PRIMARY KEY,
    user_id                  text NOT NULL,
    acquired_at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX purchase_owners_user ON purchase_owners (user_id);

-- Each App Store transaction once, whoever posted it and however often.
CREATE TABLE app_store_transactions (
    transaction_id                 text PRIMARY KEY,
    original_transaction_id        text NOT NULL,
    product_id                     text NOT NULL,
    environment                    text NOT NULL CHECK (environment IN ('Production', 'Sandbox')),
    purchase_date                  timestamptz NOT NULL,
    original_purchase_date         timestamptz,
    expires_date                   timestamptz,
    cancellation_date              timestamptz,
    cancellation_reason            text,
    is_upgraded                    boolean NOT NULL DEFAULT false,
    is_trial_period                boolean NOT NULL DEFAULT false,
    is_in_intro_offer_period       boolean NOT NULL DEFAULT false,
    ownership                      text NOT NULL DEFAULT 'purchased' CHECK (ownership IN ('purchased', 'family_shared')),
    quantity                       integer NOT NULL DEFAULT 1,
    web_order_line_item_id         text,
    subscription_group_identifier  text,
    app_account_token              text,
    promotional_offer_id           text,
    first_verification_id          uuid REFERENCES receipt_submissions (verification_id),
    created_at                     timestamptz NOT NULL DEFAULT now(),
    updated_at                     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX app_store_transactions_original ON app_store_transactions (original_transaction_id);
CREATE INDEX app_store_transactions_token ON app_store_transactions (app_account_token) WHERE app_account_token IS NOT NULL;

-- Renewal state of each auto-renewable subscription, refreshed around its expiry by the renewal refresher.
CREATE TABLE subscriptions (
    original_transaction_id    text PRIMARY KEY,
    product_id                 text NOT NULL,
    auto_renew_product_id      text,
    will_renew                 boolean NOT NULL DEFAULT false,
    expiration_intent          integer,
    in_billing_retry           boolean NOT NULL DEFAULT false,
    grace_period_expires_date  timestamptz,
    price_consent_status       integer,
    latest_expires_date        timestamptz,
    latest_receipt             text,
    environment                text NOT NULL CHECK (environment IN ('Production', 'Sandbox')),
    next_refresh_at            timestamptz,
    refresh_attempts           integer NOT NULL DEFAULT 0,
    updated_at                 timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX subscriptions_refresh_due ON subscriptions (next_refresh_at) WHERE next_refresh_at IS NOT NULL;

-- Consumable balances as a ledger: a credit once per transaction, a refund debit once per transaction,
-- a consume once per idempotency key. The balance row is updated in the same transaction as its entry.
CREATE TABLE consumable_ledger (
    entry_id         bigserial PRIMARY KEY,
    user_id          text NOT NULL,
    currency         text NOT NULL,
    amount           bigint NOT NULL,
    kind             text NOT NULL CHECK (kind IN ('credit', 'consume', 'refund')),
    transaction_id   text,
    idempotency_key  text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'consume') = (idempotency_key IS NOT NULL)),
    CHECK ((kind = 'consume') = (transaction_id IS NULL))
);
CREATE UNIQUE INDEX consumable_ledger_once_per_transaction ON consumable_ledger (transaction_id, kind) WHERE transaction_id IS NOT NULL;
CREATE UNIQUE INDEX consumable_ledger_once_per_key ON consumable_ledger (user_id, currency, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE consumable_balances (
    user_id   text NOT NULL,
    currency  text NOT NULL,
    balance   bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, currency)
);

-- Entitlements granted by hand.
CREATE TABLE grants (
    grant_id     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      text NOT NULL,
    entitlement  text NOT NULL,
    expires_at   timestamptz,
    reason       text NOT NULL,
    created_by   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz,
    revoked_by   text
);
CREATE INDEX grants_user ON grants (user_id);

-- Server-side orders: the app_account_token binds a purchase to the order's user.
CREATE TABLE orders (
    order_id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id            text NOT NULL,
    product_id         text NOT NULL,
    app_account_token  uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    status             text NOT NULL DEFAULT 'created' CHECK (status IN ('created', 'fulfilled')),
    transaction_id     text UNIQUE,
    created_at         timestamptz NOT NULL DEFAULT now(),
    fulfilled_at       timestamptz
);

-- Admin actions and ownership transfers: who (a key id, never a key), what, when, before and after.
CREATE TABLE audit_events (
    event_id     bigserial PRIMARY KEY,
    occurred_at  timestamptz NOT NULL DEFAULT now(),
    actor        text NOT NULL,
    action       text NOT NULL,
    subject      text NOT NULL,
    user_id      text,
    before       jsonb,
    after        jsonb
);
CREATE INDEX audit_events_newest ON audit_events (occurred_at DESC, event_id DESC);
