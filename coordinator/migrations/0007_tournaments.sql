-- Tournaments: each pairing is a match test of its own (job_ids, in pairing order);
-- standings are not stored but computed from those tests' counted pairs.
CREATE TABLE tournaments (
    id BIGINT PRIMARY KEY,
    spec TEXT NOT NULL,            -- the creation request, protobuf in hex
    job_ids TEXT NOT NULL,         -- comma-separated, one per pairing
    created_ms BIGINT NOT NULL
);
