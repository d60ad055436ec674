-- The coordinator's schema, one text for SQLite and PostgreSQL: only BIGINT, TEXT and
-- DOUBLE PRECISION columns, ids chosen by the coordinator (no autoincrement dialects).
-- Times are milliseconds since the Unix epoch.

-- Bearer tokens, stored as the SHA-256 of the token.
CREATE TABLE tokens (
    hash TEXT PRIMARY KEY,
    role TEXT NOT NULL,            -- 'client' or 'worker'
    worker_id BIGINT,              -- the worker a worker token belongs to
    created_ms BIGINT NOT NULL
);

CREATE TABLE workers (
    id BIGINT PRIMARY KEY,
    name TEXT NOT NULL,
    capabilities TEXT NOT NULL,    -- the last Capabilities message, protobuf in hex
    last_seen_ms BIGINT NOT NULL
);

-- Content-addressed files under the data directory's artifacts/.
CREATE TABLE artifacts (
    sha256 TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    size BIGINT NOT NULL,
    created_ms BIGINT NOT NULL
);

CREATE TABLE jobs (
    id BIGINT PRIMARY KEY,
    kind TEXT NOT NULL,            -- 'sprt', 'games' or 'selfplay'
    state TEXT NOT NULL,           -- 'running', 'finished' or 'stopped'
    outcome TEXT NOT NULL,
    description TEXT NOT NULL,
    priority BIGINT NOT NULL,
    spec TEXT NOT NULL,            -- the creation request, protobuf in hex
    units_total BIGINT NOT NULL,
    next_unit BIGINT NOT NULL,     -- units below it have been leased at least once
    units_done BIGINT NOT NULL,
    wins BIGINT NOT NULL,
    draws BIGINT NOT NULL,
    losses BIGINT NOT NULL,
    penta0 BIGINT NOT NULL,
    penta1 BIGINT NOT NULL,
    penta2 BIGINT NOT NULL,
    penta3 BIGINT NOT NULL,
    penta4 BIGINT NOT NULL,
    positions BIGINT NOT NULL,
    reasons TEXT NOT NULL,         -- JSON object: game endings by reason
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL
);

CREATE TABLE leases (
    id BIGINT PRIMARY KEY,
    job_id BIGINT NOT NULL,
    worker_id BIGINT NOT NULL,
    units TEXT NOT NULL,           -- comma-separated unit indices
    state TEXT NOT NULL,           -- 'active', 'expired', 'done' or 'cancelled'
    created_ms BIGINT NOT NULL
);
CREATE INDEX leases_by_state ON leases (state);

-- A finished unit, counted once: the primary key turns resends and re-issued leases
-- into no-ops. Its games (PGN) or training chunk live in `file` under the data
-- directory, at `file_offset` for `length` bytes.
CREATE TABLE units (
    job_id BIGINT NOT NULL,
    unit BIGINT NOT NULL,
    lease_id BIGINT NOT NULL,
    worker_id BIGINT NOT NULL,
    first_points BIGINT NOT NULL,  -- half points of the new engine: 0, 1 or 2
    second_points BIGINT NOT NULL,
    reasons TEXT NOT NULL,         -- the two games' endings, '|'-separated
    records BIGINT NOT NULL,       -- self-play positions
    file TEXT NOT NULL,
    file_offset BIGINT NOT NULL,
    length BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (job_id, unit)
);
