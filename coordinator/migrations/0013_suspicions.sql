-- A worker whose verification report a spot check found false is held suspect in that
-- job (it gets none of the job's work) until another worker's report of the unit
-- settles it: kept, so that a restart does not hand the suspect the job's work again
-- and forget what would have confirmed its quarantine.
CREATE TABLE suspicions (
    job_id BIGINT NOT NULL,
    worker_id BIGINT NOT NULL,
    unit BIGINT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (job_id, worker_id, unit)
);
