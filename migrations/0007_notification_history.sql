-- Notification history recovery: one job row per App Store environment, for the notifications Apple sent while
-- the service could not take them (Get Notification History, App Store Server API). A run is claimed with
-- FOR UPDATE SKIP LOCKED under a lease (next_run_at pushed past the lease, a fresh claim_id that every write
-- of the holder names), so two instances never fetch one environment at once. The window being fetched and the
-- page to ask for next are kept here after every page, so a crash or an Apple outage mid-way resumes where it
-- stopped; a complete run clears them, records how far it reached and schedules the next run.
CREATE TABLE notification_history_runs (
    environment       text PRIMARY KEY CHECK (environment IN ('Production', 'Sandbox')),
    -- The window of the run in progress (NULL: none; the next claim starts one) and Apple's paginationToken
    -- of its next page (NULL: its first page).
    window_start      timestamptz,
    window_end        timestamptz,
    pagination_token  text,
    -- window_end of the last complete run: the next window starts an hour before it at the latest.
    covered_until     timestamptz,
    claim_id          uuid,
    -- Due when passed; a claimed row is due again when its lease ends.
    next_run_at       timestamptz NOT NULL DEFAULT now(),
    -- Claims since the last complete run (the backoff after failures grows with them).
    attempts          integer NOT NULL DEFAULT 0,
    last_error        text,
    completed_at      timestamptz,
    updated_at        timestamptz NOT NULL DEFAULT now()
);
INSERT INTO notification_history_runs (environment) VALUES ('Production'), ('Sandbox');

-- The history window starts from the newest notification received in an environment.
CREATE INDEX app_store_notifications_received ON app_store_notifications (environment, received_at);
