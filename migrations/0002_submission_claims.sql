-- Retry leases fenced by a claim id: every claim of a submission (its first attempt, a retry, a take-over
-- after a lease ran out) draws a new claim_id, and every write of the lease holder names it. An attempt
-- whose lease expired and was claimed again therefore changes nothing when its late answer arrives.
ALTER TABLE receipt_submissions ADD COLUMN claim_id uuid;
