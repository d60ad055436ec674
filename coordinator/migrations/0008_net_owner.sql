-- A lineage belongs to the token that recorded its first net: only that token (or an
-- admin) adds nets to it or names their tests. Nets recorded before owners were kept
-- have none (''), and their lineages take nets from admins only.
ALTER TABLE nets ADD COLUMN owner TEXT NOT NULL DEFAULT '';
