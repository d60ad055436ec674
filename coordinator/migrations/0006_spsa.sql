-- An SPSA lease's probe: the iteration it was made at and each parameter's flip
-- ('37:+-+'); empty for other jobs. With the counted units, in the order they counted,
-- it is all theta is made of: theta is not stored but replayed at start.
ALTER TABLE leases ADD COLUMN probe TEXT NOT NULL DEFAULT '';
