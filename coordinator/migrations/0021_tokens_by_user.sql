-- A user's page lists the tests of each of its tokens: found by user, not by a scan.
CREATE INDEX tokens_by_user ON tokens (user_name);
