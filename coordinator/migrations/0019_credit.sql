-- Credit for the CPU a volunteer gives (#56 part 3). A lease holds `cores` of its
-- worker's cores from `created_ms`; each counted unit carries the core-milliseconds of
-- the report that brought it (the lease's cores times the time since its previous
-- report, shared among the units that report brought) and the games it played, so
-- credit is a sum over counted units alone: a unit set aside takes its credit with it.
ALTER TABLE leases ADD COLUMN cores BIGINT NOT NULL DEFAULT 1;
ALTER TABLE units ADD COLUMN cpu_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE units ADD COLUMN games BIGINT NOT NULL DEFAULT 0;
ALTER TABLE set_aside_units ADD COLUMN cpu_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE set_aside_units ADD COLUMN games BIGINT NOT NULL DEFAULT 0;
-- Units counted before credit: their CPU time was never measured (it stays 0); a game
-- pair's games are known.
UPDATE units SET games = 2 WHERE job_id IN (SELECT id FROM jobs WHERE kind IN ('sprt', 'games', 'spsa'));
