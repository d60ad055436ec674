-- A verification unit with a reference whose counted report (by first_worker_id) was
-- drawn to be reported again by another worker, so that the reference's verdicts,
-- which the coordinator cannot rule itself, are checked. When the second report gives
-- them otherwise, its worker and its stored file are kept until a third worker's
-- report decides between the two. Kept, so that a restart neither forgets a drawn
-- re-check (the draw is random and made once) nor a disputed second report.
CREATE TABLE rechecks (
    job_id BIGINT NOT NULL,
    unit BIGINT NOT NULL,
    first_worker_id BIGINT NOT NULL,
    second_worker_id BIGINT NOT NULL,
    second_file TEXT NOT NULL,
    PRIMARY KEY (job_id, unit)
);
