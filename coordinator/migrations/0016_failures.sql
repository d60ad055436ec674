-- A failure a worker reported on a job's lease (an engine that does not start, a bench
-- signature other than the test's, ...): listed with the job, and the worker gets no
-- more of the job's work. One per worker and job (the worker reports once: it is given
-- no more of the job). Kept, so that a restart neither hands the job to the worker
-- again nor forgets how many workers reported the failure that stops it.
CREATE TABLE failures (
    job_id BIGINT NOT NULL,
    worker_id BIGINT NOT NULL,
    kind TEXT NOT NULL,
    engine TEXT NOT NULL,
    detail TEXT NOT NULL,
    time_ms BIGINT NOT NULL,
    PRIMARY KEY (job_id, worker_id)
);
