-- Worker releases an admin published (#56 part 4): the latest is the one workers must
-- run; a worker of another version gets no leases, only this to update itself to.
-- Kept, so that a restarted coordinator goes on requiring it.
CREATE TABLE worker_releases (
    published_ms BIGINT PRIMARY KEY,
    version TEXT NOT NULL,
    sha256 TEXT NOT NULL,      -- the bundle, an artifact of kind 'release'
    size BIGINT NOT NULL,
    signature TEXT NOT NULL    -- the operator's ed25519 signature, hex
);
