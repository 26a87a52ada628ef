-- When the user last posted the receipt (a repost of one still in flight is the same submission): a purchase
-- another user restored after that keeps its newer owner when this submission is verified late (a retry
-- after an outage must not take back what was restored since).
ALTER TABLE receipt_submissions ADD COLUMN posted_at timestamptz NOT NULL DEFAULT now();
UPDATE receipt_submissions SET posted_at = updated_at;
