-- The net registry: one row per trained net of a training loop's lineage. Its state
-- (untested, testing, promoted, rejected) is not stored: it follows from its test job.
CREATE TABLE nets (
    id BIGINT PRIMARY KEY,
    sha256 TEXT NOT NULL,          -- the net file, an artifact
    name TEXT NOT NULL,
    size BIGINT NOT NULL,
    lineage TEXT NOT NULL,
    generation BIGINT NOT NULL,
    parent_id BIGINT NOT NULL,     -- 0: the handcrafted evaluation
    data_job_id BIGINT NOT NULL,
    test_job_id BIGINT NOT NULL,   -- 0: not tested yet
    train_loss DOUBLE PRECISION NOT NULL,
    validation_loss DOUBLE PRECISION NOT NULL,
    positions BIGINT NOT NULL,
    epochs BIGINT NOT NULL,
    description TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    UNIQUE (lineage, generation)
);
