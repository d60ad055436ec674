-- When a job ended (finished or stopped), kept so that its duration and what waited
-- on it (a training loop resumed after the job ended) are known; 0 while it runs.
-- Jobs that ended before are given their last change's time: their end, or later
-- when their priority changed or units were counted or set aside after it.
ALTER TABLE jobs ADD COLUMN ended_ms BIGINT NOT NULL DEFAULT 0;
UPDATE jobs SET ended_ms = updated_ms WHERE state IN ('finished', 'stopped');
