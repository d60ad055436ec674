-- Users: people with a name and a password, who log in for client tokens. A token
-- belongs to the user it was made for or by; the tokens made before users existed
-- belong to 'operator', the user made here (an admin without a password: it holds
-- the tokens it had and cannot log in until an admin gives it a password).
CREATE TABLE users (
    name TEXT PRIMARY KEY,
    password_hash TEXT NOT NULL,   -- argon2id, as a PHC string; '' for none
    role TEXT NOT NULL,            -- 'submitter', 'approver' or 'admin'
    state TEXT NOT NULL,           -- 'pending', 'active' or 'revoked'
    created_ms BIGINT NOT NULL,
    changed_ms BIGINT NOT NULL
);
INSERT INTO users (name, password_hash, role, state, created_ms, changed_ms)
    VALUES ('operator', '', 'admin', 'active', 0, 0);
ALTER TABLE tokens ADD COLUMN user_name TEXT NOT NULL DEFAULT '';
UPDATE tokens SET user_name = 'operator' WHERE role <> 'worker';
