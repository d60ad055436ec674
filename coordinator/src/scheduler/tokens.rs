//! Tokens as the scheduler holds them: requests authenticated against them, made,
//! revoked and audited, and the streams that end when theirs goes out of force.

use crate::access::tokens::{Principal, Role, new_token, token_hash, token_id};
use crate::scheduler::{ScheduleError, Scheduler, TokenState};
use crate::storage::changes::Change;
use crate::storage::now_ms;
use crate::storage::rows::{AuditRow, TokenRow};
use std::sync::Arc;
use std::time::Duration;

/// Checks a name or reason given in a request.
pub(super) fn check_label(what: &str, text: &str) -> Result<(), ScheduleError> {
    if text.chars().count() > 500 || text.chars().any(char::is_control) {
        return Err(ScheduleError::Invalid(format!("a {what} of at most 500 characters, no control characters")));
    }
    Ok(())
}

/// How often an open stream looks at its token's expiry.
pub const TOKEN_RECHECK: Duration = Duration::from_secs(1);

/// Why a token is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefused {
    #[error("unknown, revoked or expired token")]
    NotInForce,
    /// A stored token that grants nothing: roles fail closed.
    #[error("this token grants nothing: {0}; an admin may revoke it and make another")]
    NoRights(String),
}

impl Scheduler {
    /// Who holds `token`, and the token's id.
    pub fn authenticate(&self, token: &str) -> Result<(Principal, String), TokenRefused> {
        self.authenticate_hash(&token_hash(token))
    }

    /// Who holds the token whose hash is `hash`, and the token's id.
    pub fn authenticate_hash(&self, hash: &str) -> Result<(Principal, String), TokenRefused> {
        let state = self.lock();
        let entry = state.tokens.get(hash).ok_or(TokenRefused::NotInForce)?;
        if entry.expires_ms != 0 && now_ms() >= entry.expires_ms {
            return Err(TokenRefused::NotInForce);
        }
        let principal = entry.principal.clone().map_err(TokenRefused::NoRights)?;
        Ok((principal, token_id(hash).to_owned()))
    }

    /// The role of the user token with id `id` while it is in force; `None` when it is
    /// revoked, expired, unknown or not a user's.
    pub fn role_of(&self, id: &str) -> Option<Role> {
        let state = self.lock();
        let token = state.token_with_id(id)?;
        match token.principal {
            Ok(Principal::Client(role)) if token.expires_ms == 0 || now_ms() < token.expires_ms => Some(role),
            _ => None,
        }
    }

    /// Resolves once the token whose hash is `hash` is no longer in force: at once when
    /// it is revoked, within [`TOKEN_RECHECK`] when it expires. Streams opened with it
    /// end then, so that a revocation reaches every call, not only the next ones.
    pub fn out_of_force(self: &Arc<Self>, hash: String) -> impl std::future::Future<Output = ()> + Send + 'static {
        let weak = Arc::downgrade(self);
        let mut revocations = self.revocations.subscribe();
        async move {
            loop {
                match weak.upgrade() {
                    Some(scheduler) if scheduler.authenticate_hash(&hash).is_ok() => {}
                    _ => return,
                }
                tokio::select! {
                    _ = revocations.changed() => {}
                    _ = tokio::time::sleep(TOKEN_RECHECK) => {}
                }
            }
        }
    }

    /// Creates a token of `role` for `name`, expiring at `expires_ms` (0: never), of
    /// the user of `actor`, the token that asked (its id, for the audit log too).
    pub async fn create_token(
        &self,
        role: Role,
        name: &str,
        expires_ms: i64,
        actor: &str,
    ) -> Result<String, ScheduleError> {
        check_label("name", name)?;
        let user = self.user_of_token(actor).unwrap_or_default();
        let token = new_token();
        self.store_token(&token, role, name, expires_ms, &user, actor).await?;
        Ok(token)
    }

    /// The user the token with id `id` belongs to, while it is in force.
    pub fn user_of_token(&self, id: &str) -> Option<String> {
        let state = self.lock();
        Some(state.token_with_id(id)?.user.clone()).filter(|user| !user.is_empty())
    }

    /// The ids of the tokens in force that are `matching`.
    pub(super) fn token_ids(&self, matching: impl Fn(&TokenState) -> bool) -> Vec<String> {
        let state = self.lock();
        state.tokens.iter().filter(|(_, token)| matching(token)).map(|(hash, _)| token_id(hash).to_owned()).collect()
    }

    /// The person the token with id `id` speaks for, when it is one: the user of a
    /// log-in or of a token made for it, never `operator`, whom every token made before
    /// users existed belongs to (an admin's and its submitters' alike), so that what a
    /// user may do to its own (revoke, retire, not approve) reaches no one else's.
    pub fn person_of_token(&self, id: &str) -> Option<String> {
        self.user_of_token(id).filter(|user| user != super::users::OPERATOR)
    }

    /// Whether the tokens with ids `one` and `other` speak for the same person (a user
    /// other than `operator`), the first one revoked or not.
    pub fn same_person(&self, one: &str, other: &str) -> bool {
        let person = self.lock().token_users.get(one).cloned().filter(|u| !u.is_empty() && u != super::users::OPERATOR);
        person.is_some() && person == self.person_of_token(other)
    }

    /// Puts `token` in force, belonging to `user`.
    pub(super) async fn store_token(
        &self,
        token: &str,
        role: Role,
        name: &str,
        expires_ms: i64,
        user: &str,
        actor: &str,
    ) -> Result<(), ScheduleError> {
        let hash = token_hash(token);
        let id = token_id(&hash).to_owned();
        self.put_in_force(hash, Principal::Client(role), name, expires_ms, user).await?;
        self.audit(actor, "token.create", &format!("{id} {} '{name}' of {user}", role.name())).await
    }

    /// Stores a new token of `principal`, whose hash is `hash`, and puts it in force.
    pub(super) async fn put_in_force(
        &self,
        hash: String,
        principal: Principal,
        name: &str,
        expires_ms: i64,
        user: &str,
    ) -> Result<(), ScheduleError> {
        let row = TokenRow {
            hash: hash.clone(),
            role: principal.stored_role().to_owned(),
            worker_id: match principal {
                Principal::Worker(id) => Some(id as i64),
                _ => None,
            },
            name: name.to_owned(),
            created_ms: now_ms(),
            expires_ms,
            revoked_ms: 0,
            user: user.to_owned(),
        };
        self.writer.write(Change::Token(row)).await?;
        let mut state = self.lock();
        state.token_users.insert(token_id(&hash).to_owned(), user.to_owned());
        state.tokens.insert(hash, TokenState { principal: Ok(principal), expires_ms, user: user.to_owned() });
        Ok(())
    }

    /// Puts the admin's token in force (at first start, when none exists): made and
    /// written where the admin reads it by the caller first, so that a crash between
    /// the two never leaves a token in force that nobody holds (the next start makes
    /// another and writes it over).
    pub async fn create_client_token(&self, token: &str) -> Result<(), ScheduleError> {
        self.store_token(token, Role::Admin, "admin", 0, super::users::OPERATOR, "coordinator").await
    }

    /// Whether any admin token is in force.
    pub fn has_client_token(&self) -> bool {
        self.lock().tokens.values().any(|t| t.principal == Ok(Principal::Client(Role::Admin)))
    }

    /// Revokes the token whose id is `id` (a worker's too): refused from the next call.
    /// A worker key's machines lose their tokens with it.
    pub async fn revoke_token(&self, id: &str, actor: &str) -> Result<(), ScheduleError> {
        let (hash, key, orphaned) = {
            let mut state = self.lock();
            let matching: Vec<String> =
                state.tokens.keys().filter(|hash| !id.is_empty() && token_id(hash) == id).cloned().collect();
            let [hash] = matching.as_slice() else {
                return Err(ScheduleError::NotFound(format!("no token in force with id '{id}'")));
            };
            let removed = state.tokens.remove(hash).map(|token| token.principal);
            // A worker left without a token in force can report nothing more: its
            // leases are withdrawn now rather than left to expire.
            let orphaned = match removed {
                Some(Ok(Principal::Worker(worker)))
                    if !state.tokens.values().any(|t| t.principal == Ok(Principal::Worker(worker))) =>
                {
                    state.workers.get(&worker).map(|w| w.leases.iter().copied().collect()).unwrap_or_default()
                }
                _ => Vec::new(),
            };
            (hash.clone(), removed == Some(Ok(Principal::WorkerKey)), orphaned)
        };
        self.revocations.send_modify(|count| *count += 1);
        self.writer.write(Change::RevokeToken { hash: hash.clone(), at_ms: now_ms() }).await?;
        self.audit(actor, "token.revoke", id).await?;
        self.withdraw_leases(orphaned).await?;
        if key {
            for worker in self.machines_of_key(&hash) {
                for machine_token in self.worker_token_ids(worker) {
                    Box::pin(self.revoke_token(&machine_token, actor)).await?;
                }
            }
        }
        Ok(())
    }

    /// Records an action in the audit log.
    pub async fn audit(&self, actor: &str, action: &str, detail: &str) -> Result<(), ScheduleError> {
        let entry =
            AuditRow { at_ms: now_ms(), actor: actor.to_owned(), action: action.to_owned(), detail: detail.to_owned() };
        self.writer.write(Change::Audit(entry)).await?;
        Ok(())
    }
}
