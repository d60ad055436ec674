-- When a finished job's games or training data were removed under the retention
-- settings (0: still stored). Its counts, results and unit rows stay.
ALTER TABLE jobs ADD COLUMN data_removed_ms BIGINT NOT NULL DEFAULT 0;
