-- A user's events go out one at a time in sequence order while the receiver answers: an event is claimed only when
-- no earlier event of its user is pending and due, or being sent (an earlier one waiting for a later retry does not
-- hold it back). This index finds a user's earlier pending events without reading the delivered ones.
CREATE INDEX webhook_events_pending_by_user ON webhook_events (user_id, sequence) WHERE delivery_status = 'pending';
