-- Games won on time (the loser's clock ran out) are a verdict of the clock, not the
-- board: counted apart by winner, and as draws in the over-the-board counts beside the
-- repetition rulings (0015), as `xq-worker match` counts them. The matches stored
-- before are counted again from their units: a unit's reasons are its two games'
-- endings, 'first|second'; a game lost on time is stored as 'time forfeit'.
ALTER TABLE jobs ADD COLUMN forfeit_wins_new BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN forfeit_wins_base BIGINT NOT NULL DEFAULT 0;

CREATE TABLE board_units AS
SELECT job_id, first_points, second_points,
    CASE WHEN reasons LIKE 'perpetual check|%' OR reasons LIKE 'perpetual chase|%'
        OR reasons LIKE 'repetitive move|%' THEN 1 ELSE 0 END AS first_ruled,
    CASE WHEN reasons LIKE '%|perpetual check' OR reasons LIKE '%|perpetual chase'
        OR reasons LIKE '%|repetitive move' THEN 1 ELSE 0 END AS second_ruled,
    CASE WHEN reasons LIKE 'time forfeit|%' THEN 1 ELSE 0 END AS first_forfeit,
    CASE WHEN reasons LIKE '%|time forfeit' THEN 1 ELSE 0 END AS second_forfeit
FROM units
WHERE job_id IN (SELECT id FROM jobs WHERE kind NOT IN ('selfplay', 'verify'));

CREATE TABLE board_pairs AS
SELECT job_id,
    CASE WHEN first_ruled = 1 OR first_forfeit = 1 THEN 1 ELSE first_points END
        + CASE WHEN second_ruled = 1 OR second_forfeit = 1 THEN 1 ELSE second_points END AS points,
    CASE WHEN first_forfeit = 1 AND first_points = 2 THEN 1 ELSE 0 END
        + CASE WHEN second_forfeit = 1 AND second_points = 2 THEN 1 ELSE 0 END AS new_forfeits,
    CASE WHEN first_forfeit = 1 AND first_points = 0 THEN 1 ELSE 0 END
        + CASE WHEN second_forfeit = 1 AND second_points = 0 THEN 1 ELSE 0 END AS base_forfeits
FROM board_units;

UPDATE jobs SET
    board_penta0 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points <= 0),
    board_penta1 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points = 1),
    board_penta2 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points = 2),
    board_penta3 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points = 3),
    board_penta4 = (SELECT COUNT(*) FROM board_pairs b WHERE b.job_id = jobs.id AND b.points >= 4),
    forfeit_wins_new = (SELECT COALESCE(SUM(b.new_forfeits), 0) FROM board_pairs b WHERE b.job_id = jobs.id),
    forfeit_wins_base = (SELECT COALESCE(SUM(b.base_forfeits), 0) FROM board_pairs b WHERE b.job_id = jobs.id)
WHERE kind NOT IN ('selfplay', 'verify');

DROP TABLE board_pairs;
DROP TABLE board_units;
