-- Worker keys: a user's key (a token of role 'worker-key') serves many machines. Each
-- machine enrolls once with a machine id it keeps and becomes a worker of its own, with
-- a worker token, so that conduct, quarantine, pace and leases stay per machine.
CREATE TABLE machines (
    key_hash TEXT NOT NULL,      -- the key's token hash
    machine_id TEXT NOT NULL,    -- kept on the machine
    worker_id BIGINT NOT NULL,
    user_name TEXT NOT NULL,     -- the key's user, credited with the machine's work
    PRIMARY KEY (key_hash, machine_id)
);
