-- A match's counts as the board alone decided its games: pairs by the new engine's
-- points with each game won by a repetition ruling (a lone perpetual check or chase,
-- Xiongqi's repetitive move) counted as a draw, and such wins by each engine. Kept
-- beside the pentanomial and changed with it, unit by unit.
ALTER TABLE jobs ADD COLUMN board_penta0 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN board_penta1 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN board_penta2 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN board_penta3 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN board_penta4 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN ruled_wins_new BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN ruled_wins_base BIGINT NOT NULL DEFAULT 0;

-- The matches stored before, counted from their units. A unit's reasons are its two
-- games' endings, 'first|second'; the three endings are those of
-- `Reason::is_repetition_violation` as the arbiter names them (a test counts a
-- database migrated from the schema before against the coordinator's own count).
CREATE TABLE board_units AS
SELECT job_id, first_points, second_points,
    CASE WHEN reasons LIKE 'perpetual check|%' OR reasons LIKE 'perpetual chase|%'
        OR reasons LIKE 'repetitive move|%' THEN 1 ELSE 0 END AS first_ruled,
    CASE WHEN reasons LIKE '%|perpetual check' OR reasons LIKE '%|perpetual chase'
        OR reasons LIKE '%|repetitive move' THEN 1 ELSE 0 END AS second_ruled
FROM units
WHERE job_id IN (SELECT id FROM jobs WHERE kind NOT IN ('selfplay', 'verify'));

CREATE TABLE board_pairs AS
SELECT job_id,
    CASE WHEN first_ruled = 1 THEN 1 ELSE first_points END
        + CASE WHEN second_ruled = 1 THEN 1 ELSE second_points END AS points,
    CASE WHEN first_ruled = 1 AND first_points = 2 THEN 1 ELSE 0 END
        + CASE WHEN second_ruled = 1 AND second_points = 2 THEN 1 ELSE 0 END AS new_ruled,
    CASE WHEN first_ruled = 1 AND first_points = 0 THEN 1 ELSE 0 END
        + CASE WHEN second_ruled = 1 AND second_points = 0 THEN 1 ELSE 0 END AS base_ruled
FROM board_units;

UPDATE jobs SET
    board_penta0 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points <= 0),
    board_penta1 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points = 1),
    board_penta2 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points = 2),
    board_penta3 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points = 3),
    board_penta4 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points >= 4),
    ruled_wins_new = (SELECT COALESCE(SUM(b.new_ruled), 0) FROM board_pairs b WHERE b.job_id = jobs.id),
    ruled_wins_base = (SELECT COALESCE(SUM(b.base_ruled), 0) FROM board_pairs b WHERE b.job_id = jobs.id)
WHERE kind NOT IN ('selfplay', 'verify');

DROP TABLE board_pairs;
DROP TABLE board_units;
