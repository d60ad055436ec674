-- Creating a job is idempotent under retries: a client names each creation with a
-- request id (gRPC metadata `xq-request-id`), stored with the job in the same row, so
-- that a retry after a lost answer or a crash finds the job instead of making a twin.
-- The digest (SHA-256 of the request) tells a retry from another request reusing the id.
ALTER TABLE jobs ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN request_digest TEXT NOT NULL DEFAULT '';
