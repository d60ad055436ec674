-- Creating a tournament is idempotent under retries, as creating a job is (0009): the
-- client's name for the creation (gRPC metadata `xq-request-id`) and the request's
-- SHA-256 are stored in the event's row, written in the same transaction as its first
-- tests, so that a retry after a lost answer or a crash finds the event.
ALTER TABLE tournaments ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tournaments ADD COLUMN request_digest TEXT NOT NULL DEFAULT '';
