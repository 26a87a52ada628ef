-- A redelivery starts a new round of attempts: its backoff counts from the round's first attempt, while
-- `attempts` keeps counting every attempt the event ever had (as the deliveries list shows it).
ALTER TABLE webhook_events ADD COLUMN attempts_before_round integer NOT NULL DEFAULT 0;
