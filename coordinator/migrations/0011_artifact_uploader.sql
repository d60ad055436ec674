-- Who uploaded an artifact first (a token's id; empty: the coordinator itself, or
-- uploaded before uploaders were kept): a submitter's uploads count against its quota.
-- created_ms is from now on the artifact's latest upload: an artifact no job or net
-- names is collected once it was last uploaded longer ago than the grace period.
ALTER TABLE artifacts ADD COLUMN uploader TEXT NOT NULL DEFAULT '';
