-- A worker's standing: 'active', 'disabled' (no more work; its results stay counted)
-- or 'quarantined' (no more work; its results in running tests set aside and those
-- tests recounted without them), with the reason given.
ALTER TABLE workers ADD COLUMN standing TEXT NOT NULL DEFAULT 'active';
ALTER TABLE workers ADD COLUMN standing_reason TEXT NOT NULL DEFAULT '';

-- Units set aside from their test when their worker was quarantined: kept as they were
-- stored (their games stay in their files), no longer counted; the units are played
-- again by other workers.
CREATE TABLE set_aside_units (
    job_id BIGINT NOT NULL,
    unit BIGINT NOT NULL,
    lease_id BIGINT NOT NULL,
    worker_id BIGINT NOT NULL,
    first_points BIGINT NOT NULL,
    second_points BIGINT NOT NULL,
    reasons TEXT NOT NULL,
    records BIGINT NOT NULL,
    file TEXT NOT NULL,
    file_offset BIGINT NOT NULL,
    length BIGINT NOT NULL,
    created_ms BIGINT NOT NULL,
    set_aside_ms BIGINT NOT NULL,
    PRIMARY KEY (job_id, unit, lease_id)
);
