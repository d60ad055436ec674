-- Roles: 'admin' (every action), 'submitter' (tests and self-play jobs, their own jobs'
-- stop and priority, and reading) and 'worker'. Tokens written before roles existed
-- as 'client' were the admin's.
UPDATE tokens SET role = 'admin' WHERE role = 'client';
ALTER TABLE tokens ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE tokens ADD COLUMN expires_ms BIGINT NOT NULL DEFAULT 0;  -- 0: never
ALTER TABLE tokens ADD COLUMN revoked_ms BIGINT NOT NULL DEFAULT 0;  -- 0: not revoked

-- Who created a job: its token's id (the hash's first 12 hex digits).
ALTER TABLE jobs ADD COLUMN submitter TEXT NOT NULL DEFAULT '';

-- What admins and submitters did: tokens made and revoked, workers' standings, jobs
-- created, approved, stopped and reprioritised.
CREATE TABLE audit_log (
    at_ms BIGINT NOT NULL,
    actor TEXT NOT NULL,           -- the acting token's id, or 'coordinator'
    action TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_log_by_time ON audit_log (at_ms);
