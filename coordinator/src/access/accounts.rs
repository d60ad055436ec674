//! Users' accounts: what a name and a password may be, how a password is kept (argon2id,
//! memory-hard, as a PHC string with its own salt), how sign-ups are taken, and the
//! bound on log-in attempts a name may take however many addresses they come from.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};

use crate::names::is_plain_name;

/// The most bytes of a user's name.
pub const MAX_NAME_BYTES: usize = 32;

/// A password's length in bytes: long enough to resist guessing at the log-in bound,
/// short enough that hashing one is the work of a few milliseconds.
pub const PASSWORD_BYTES: std::ops::RangeInclusive<usize> = 10..=1024;

/// Log-in attempts one name may take in [`ATTEMPTS_PER`]; further ones are refused
/// without a password being looked at.
pub const ATTEMPTS: u32 = 10;
pub const ATTEMPTS_PER: Duration = Duration::from_secs(15 * 60);

/// Names whose attempts are kept (the oldest forgotten past it).
const NAMES_KEPT: usize = 65_536;

/// Users waiting for acceptance at most, by default: past it sign-ups are refused
/// until an admin or an approver has looked at them.
pub const MAX_PENDING: usize = 1_000;

/// Who may make an account.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SignupMode {
    /// Anyone: the account is active at once.
    Open,
    /// Anyone, the account waiting for an admin's or an approver's acceptance.
    #[default]
    Approval,
    /// Nobody: admins make tokens.
    Closed,
}

impl std::str::FromStr for SignupMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "open" => Ok(SignupMode::Open),
            "approval" => Ok(SignupMode::Approval),
            "closed" => Ok(SignupMode::Closed),
            other => Err(format!("'{}': open, approval or closed", other.escape_debug())),
        }
    }
}

/// Why an account's name or password is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AccountError {
    #[error("a user's name is 1 to {MAX_NAME_BYTES} letters, digits, '.', '_' or '-'")]
    Name,
    #[error("a password is {} to {} bytes", PASSWORD_BYTES.start(), PASSWORD_BYTES.end())]
    Password,
    #[error("'{name}' has tried to log in {ATTEMPTS} times in {} minutes; try again later", ATTEMPTS_PER.as_secs() / 60)]
    TooManyAttempts { name: String },
}

/// A name that pages, logs and terminals show as it is: no markup, no control or
/// look-alike characters.
pub fn check_name(name: &str) -> Result<(), AccountError> {
    if !is_plain_name(name, MAX_NAME_BYTES, "._-") {
        return Err(AccountError::Name);
    }
    Ok(())
}

/// A password of an acceptable length.
pub fn check_password(password: &str) -> Result<(), AccountError> {
    if !PASSWORD_BYTES.contains(&password.len()) {
        return Err(AccountError::Password);
    }
    Ok(())
}

/// `password` hashed with argon2id's default cost and a random salt, as a PHC string.
pub fn hash_password(password: &str) -> String {
    Argon2::default().hash_password(password.as_bytes()).expect("argon2 with its default parameters").to_string()
}

/// A hash of no user's password: names that do not exist are checked against it, so a
/// log-in takes as long whether the name exists or not.
static NOBODY: LazyLock<String> = LazyLock::new(|| hash_password("no user has this password"));

/// Whether `password` is the one `stored` was made of; `None` (no user, or a user
/// without a password) is checked against a hash of no one's, and fails.
pub fn verify_password(stored: Option<&str>, password: &str) -> bool {
    let (hash, real) = match stored {
        Some(stored) if !stored.is_empty() => (stored, true),
        _ => (NOBODY.as_str(), false),
    };
    let Ok(parsed) = PasswordHash::new(hash) else { return false };
    // argon2 compares the digests in constant time.
    Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok() && real
}

/// The log-in attempts of each name in the current window.
#[derive(Debug, Default)]
pub struct LoginAttempts {
    by_name: Mutex<HashMap<String, (Instant, u32)>>,
}

impl LoginAttempts {
    /// Counts an attempt of `name`, refused past [`ATTEMPTS`] in [`ATTEMPTS_PER`].
    pub fn admit(&self, name: &str) -> Result<(), AccountError> {
        let now = Instant::now();
        let mut by_name = self.by_name.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if by_name.len() >= NAMES_KEPT && !by_name.contains_key(name) {
            by_name.retain(|_, (since, _)| now.duration_since(*since) < ATTEMPTS_PER);
            if by_name.len() >= NAMES_KEPT {
                // Every kept name tried within the window: forget the one that began first.
                let oldest = by_name.iter().min_by_key(|(_, (since, _))| *since).map(|(n, _)| n.clone());
                by_name.remove(&oldest.unwrap_or_default());
            }
        }
        let (since, count) = by_name.entry(name.to_owned()).or_insert((now, 0));
        if now.duration_since(*since) >= ATTEMPTS_PER {
            (*since, *count) = (now, 0);
        }
        if *count >= ATTEMPTS {
            return Err(AccountError::TooManyAttempts { name: name.to_owned() });
        }
        *count += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_markup_control_or_other_characters_are_refused() {
        for good in ["alice", "a", "Bob_2.x-y", &"n".repeat(32)] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        for bad in ["", "<b>x</b>", "a b", "eve\u{1b}[2J", "line\nbreak", "ａlice", "x\u{200b}", &"n".repeat(33)] {
            assert_eq!(check_name(bad), Err(AccountError::Name), "{bad:?}");
        }
        assert_eq!(check_password("short"), Err(AccountError::Password));
        assert_eq!(check_password(&"p".repeat(1025)), Err(AccountError::Password));
        assert_eq!(check_password("long enough"), Ok(()));
    }

    #[test]
    fn a_password_verifies_against_its_own_hash_only() {
        let hash = hash_password("correct horse");
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert_ne!(hash, hash_password("correct horse"), "a salt of its own");
        assert!(verify_password(Some(&hash), "correct horse"));
        assert!(!verify_password(Some(&hash), "correct horsf"));
        assert!(!verify_password(None, "no user has this password"), "no user logs in");
        assert!(!verify_password(Some(""), "anything at all"));
        assert!(!verify_password(Some("not a hash"), "correct horse"));
    }

    #[test]
    fn a_name_takes_a_bounded_number_of_attempts() {
        let attempts = LoginAttempts::default();
        for _ in 0..ATTEMPTS {
            attempts.admit("alice").unwrap();
        }
        assert_eq!(attempts.admit("alice"), Err(AccountError::TooManyAttempts { name: "alice".to_owned() }));
        attempts.admit("bob").expect("another name has its own");
    }
}
