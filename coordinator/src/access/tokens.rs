//! Bearer tokens: 256 random bits shown once, stored as their SHA-256, so that a copy of
//! the database does not let anyone in. Each has a role, a name, an id (the hash's
//! first 12 hex digits: what lists show and revocation names) and may expire.
//!
//! An expiry is a date on the coordinator's wall clock, as lists show it, like a
//! certificate's: a clock set past it ends the token (and, within a recheck, the
//! streams opened with it), a clock set back before it gives the token its time back.
//! Revocation ends a token whatever the clock.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// What a user's token may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Everything: tokens, workers, approvals, any job.
    Admin,
    /// A submitter's rights, and the acceptance of others' jobs and sign-ups (never its
    /// own jobs').
    Approver,
    /// Its own tests and self-play jobs (created, stopped, reprioritised) and reading.
    Submitter,
}

impl Role {
    /// As stored and shown.
    pub fn name(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Approver => "approver",
            Role::Submitter => "submitter",
        }
    }

    /// The role stored or asked for as `name` (exactly: roles fail closed).
    pub fn named(name: &str) -> Option<Role> {
        [Role::Admin, Role::Approver, Role::Submitter].into_iter().find(|role| role.name() == name)
    }

    /// Whether it may accept others' jobs and sign-ups.
    pub fn approves(self) -> bool {
        matches!(self, Role::Admin | Role::Approver)
    }
}

/// Who a token belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Principal {
    /// A user or tool.
    Client(Role),
    /// One worker.
    Worker(u64),
    /// A user's worker key: it only enrolls machines, each then a worker of its own.
    WorkerKey,
}

impl Principal {
    /// The role a token of it is stored with.
    pub fn stored_role(self) -> &'static str {
        match self {
            Principal::Client(role) => role.name(),
            Principal::Worker(_) => "worker",
            Principal::WorkerKey => "worker-key",
        }
    }
}

/// The hash of the token a request was authenticated with, kept in the request's
/// extensions so that a stream can look again at whether it is in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenHash(pub String);

/// The public id of the token whose hash is `hash`.
pub fn token_id(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// A fresh random token, in hex.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// What is stored of a token.
pub fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The token of an `authorization: Bearer <token>` value.
pub fn bearer(value: &str) -> Option<&str> {
    value.strip_prefix("Bearer ").map(str::trim).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashes_stable() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert_eq!(token_hash(&a), token_hash(&a));
        assert_ne!(token_hash(&a), a);
        // SHA-256 of "abc" (FIPS 180-2 example).
        assert_eq!(token_hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(bearer("Bearer xyz"), Some("xyz"));
        assert_eq!(bearer("Basic xyz"), None);
        assert_eq!(bearer("Bearer "), None);
    }
}
