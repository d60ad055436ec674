//! Users as the scheduler holds them: signed up, accepted, given a role, logged in for
//! tokens of their own, and revoked with every token they hold.

use crate::access::accounts::{SignupMode, check_name};
use std::collections::HashMap;

use crate::access::tokens::{Role, new_token, token_id};
use crate::scheduler::{ScheduleError, Scheduler};
use crate::storage::changes::Change;
use crate::storage::now_ms;
use crate::storage::rows::UserRow;
use xq_proto::v1;

/// The user the tokens made before users existed belong to, and the first admin
/// token's (migration 0017).
pub const OPERATOR: &str = "operator";

/// Where a user stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standing {
    /// Signed up, waiting for an admin's or an approver's acceptance.
    Pending,
    Active,
    /// Its tokens revoked; it cannot log in.
    Revoked,
}

impl Standing {
    pub fn name(self) -> &'static str {
        match self {
            Standing::Pending => "pending",
            Standing::Active => "active",
            Standing::Revoked => "revoked",
        }
    }

    fn named(name: &str) -> Option<Standing> {
        [Standing::Pending, Standing::Active, Standing::Revoked].into_iter().find(|s| s.name() == name)
    }
}

/// A user in memory.
#[derive(Clone, Debug)]
pub struct UserState {
    pub role: Role,
    pub standing: Standing,
    /// '' for none.
    pub password_hash: String,
    pub created_ms: i64,
}

impl UserState {
    /// From its stored row; a role or standing this version does not know is refused
    /// (the user is left out: it cannot log in).
    pub fn from_row(row: &UserRow) -> Result<UserState, String> {
        let role = Role::named(&row.role).ok_or_else(|| format!("unknown role '{}'", row.role.escape_debug()))?;
        let standing =
            Standing::named(&row.state).ok_or_else(|| format!("unknown state '{}'", row.state.escape_debug()))?;
        Ok(UserState { role, standing, password_hash: row.password_hash.clone(), created_ms: row.created_ms })
    }
}

/// How long a log-in's token is in force when the request does not say.
pub const LOGIN_TOKEN_DAYS: i64 = 30;

impl Scheduler {
    /// Makes the account `name` with a password of hash `password_hash`, as `mode`
    /// says: active at once, pending, or refused. Its standing.
    pub async fn sign_up(&self, name: &str, password_hash: &str, mode: SignupMode) -> Result<Standing, ScheduleError> {
        check_name(name).map_err(|e| ScheduleError::Invalid(e.to_string()))?;
        let standing = match mode {
            SignupMode::Closed => {
                return Err(ScheduleError::Denied(
                    "this coordinator takes no sign-ups: ask its admin for a token".to_owned(),
                ));
            }
            SignupMode::Open => Standing::Active,
            SignupMode::Approval => Standing::Pending,
        };
        let row = {
            let mut state = self.lock();
            // Names differing only in case would be told apart by no one reading a page.
            if state.users.keys().any(|taken| taken.eq_ignore_ascii_case(name)) {
                return Err(ScheduleError::Invalid(format!("the name '{name}' is taken")));
            }
            let pending = state.users.values().filter(|user| user.standing == Standing::Pending).count();
            if standing == Standing::Pending && pending >= self.config.pending_users {
                return Err(ScheduleError::Denied(format!(
                    "{pending} sign-ups already wait for acceptance, the most this coordinator keeps; try again later"
                )));
            }
            let now = now_ms();
            let user =
                UserState { role: Role::Submitter, standing, password_hash: password_hash.to_owned(), created_ms: now };
            // Held at once, so that two sign-ups of one name cannot both be taken.
            state.users.insert(name.to_owned(), user);
            row(name, password_hash, Role::Submitter, standing, now)
        };
        if let Err(error) = self.writer.write(Change::User(row)).await {
            self.lock().users.remove(name);
            return Err(error.into());
        }
        self.audit(name, "user.signup", standing.name()).await?;
        Ok(standing)
    }

    /// The user `name`, for a log-in.
    pub fn user(&self, name: &str) -> Option<UserState> {
        self.lock().users.get(name).cloned()
    }

    /// A new token of the active user `name`, of its role, in force for
    /// `expires_seconds` (0: [`LOGIN_TOKEN_DAYS`]). Its token, id and role.
    pub async fn log_in(&self, name: &str, expires_seconds: u64) -> Result<(String, String, Role), ScheduleError> {
        let role = match self.user(name) {
            Some(UserState { standing: Standing::Active, role, .. }) => role,
            _ => return Err(ScheduleError::Denied(format!("'{name}' is not an active user"))),
        };
        let lifetime_ms = match expires_seconds {
            0 => LOGIN_TOKEN_DAYS * 86_400_000,
            seconds => i64::try_from(seconds.saturating_mul(1000)).unwrap_or(i64::MAX),
        };
        let token = new_token();
        let expires_ms = now_ms().saturating_add(lifetime_ms);
        self.store_token(&token, role, "log-in", expires_ms, name, name).await?;
        let id = token_id(&crate::access::tokens::token_hash(&token)).to_owned();
        Ok((token, id, role))
    }

    /// Accepts the pending user `name`; `actor` (a token's id) may approve.
    pub async fn accept_user(&self, name: &str, actor: &str) -> Result<v1::UserInfo, ScheduleError> {
        self.change_user(name, actor, "user.accept", |user| match user.standing {
            Standing::Pending => {
                user.standing = Standing::Active;
                Ok(())
            }
            other => Err(ScheduleError::Denied(format!("'{name}' is {}, not waiting for acceptance", other.name()))),
        })
        .await
    }

    /// Gives the user `name` the role `role` (its next tokens have it).
    pub async fn set_user_role(&self, name: &str, role: Role, actor: &str) -> Result<v1::UserInfo, ScheduleError> {
        self.change_user(name, actor, "user.role", |user| {
            user.role = role;
            Ok(())
        })
        .await
    }

    /// Marks the user `name` revoked; the ids of its tokens in force, which the caller
    /// revokes with all that revoking a token does.
    pub async fn revoke_user(&self, name: &str, actor: &str) -> Result<Vec<String>, ScheduleError> {
        self.change_user(name, actor, "user.revoke", |user| {
            user.standing = Standing::Revoked;
            Ok(())
        })
        .await?;
        Ok(self.tokens_of(name))
    }

    /// The ids of the tokens in force of the user `name`.
    pub fn tokens_of(&self, name: &str) -> Vec<String> {
        let mut ids = self.token_ids(|token| token.user == name);
        ids.sort();
        ids
    }

    /// Every user, by name, their tokens found in one pass over the tokens in force
    /// rather than one pass a user.
    pub fn users(&self) -> Vec<v1::UserInfo> {
        let state = self.lock();
        let mut tokens: HashMap<&str, Vec<String>> = HashMap::new();
        for (hash, token) in &state.tokens {
            tokens.entry(token.user.as_str()).or_default().push(token_id(hash).to_owned());
        }
        let mut users: Vec<v1::UserInfo> = state
            .users
            .iter()
            .map(|(name, user)| user_view(name, user, tokens.remove(name.as_str()).unwrap_or_default()))
            .collect();
        users.sort_by(|a, b| a.name.cmp(&b.name));
        users
    }

    /// The user `name` as lists show it.
    pub fn user_info(&self, name: &str) -> Option<v1::UserInfo> {
        let user = self.user(name)?;
        Some(user_view(name, &user, self.tokens_of(name)))
    }

    /// Changes the user `name` by `change`, stores and audits it.
    async fn change_user(
        &self,
        name: &str,
        actor: &str,
        action: &str,
        change: impl FnOnce(&mut UserState) -> Result<(), ScheduleError>,
    ) -> Result<v1::UserInfo, ScheduleError> {
        let row = {
            let mut state = self.lock();
            let user = state.users.get_mut(name).ok_or_else(|| ScheduleError::NotFound(format!("no user '{name}'")))?;
            let mut changed = user.clone();
            change(&mut changed)?;
            *user = changed.clone();
            row(name, &changed.password_hash, changed.role, changed.standing, changed.created_ms)
        };
        let detail = format!("{name} {} {}", row.role, row.state);
        self.writer.write(Change::User(row)).await?;
        self.audit(actor, action, &detail).await?;
        self.user_info(name).ok_or_else(|| ScheduleError::NotFound(format!("no user '{name}'")))
    }
}

fn row(name: &str, password_hash: &str, role: Role, standing: Standing, created_ms: i64) -> UserRow {
    UserRow {
        name: name.to_owned(),
        password_hash: password_hash.to_owned(),
        role: role.name().to_owned(),
        state: standing.name().to_owned(),
        created_ms,
        changed_ms: now_ms(),
    }
}

/// The user `name` as lists show it, with the ids of its tokens in force.
fn user_view(name: &str, user: &UserState, mut token_ids: Vec<String>) -> v1::UserInfo {
    token_ids.sort();
    v1::UserInfo {
        name: name.to_owned(),
        role: user.role.name().to_owned(),
        state: user.standing.name().to_owned(),
        created_ms: user.created_ms,
        token_ids,
    }
}
