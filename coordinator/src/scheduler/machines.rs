//! Worker keys and the machines they enroll: one key of a user serves many machines,
//! each of which becomes a worker of its own (its conduct, quarantine, pace and leases
//! its own), credited to the user. A machine enrolls again with the id it keeps and is
//! the same worker; a key reaches at most a bounded number of machines.

use crate::access::tokens::{Principal, new_token, token_hash, token_id};
use crate::names::is_plain_name;
use crate::scheduler::tokens::check_label;
use crate::scheduler::{ScheduleError, Scheduler};
use crate::storage::changes::Change;
use crate::storage::now_ms;
use crate::storage::rows::MachineRow;
use xq_proto::v1;

/// The most machines one key enrolls, by default.
pub const MACHINES_PER_KEY: usize = 256;

/// A machine id as the worker keeps it: 1 to 64 letters, digits, '_' or '-'.
pub fn check_machine_id(id: &str) -> Result<(), ScheduleError> {
    if !is_plain_name(id, 64, "_-") {
        return Err(ScheduleError::Invalid("a machine id is 1 to 64 letters, digits, '_' or '-'".to_owned()));
    }
    Ok(())
}

impl Scheduler {
    /// A worker key of `user`, named `name`: the key (shown once) and its id.
    pub async fn create_worker_key(
        &self,
        user: &str,
        name: &str,
        actor: &str,
    ) -> Result<(String, String), ScheduleError> {
        check_label("name", name)?;
        if user.is_empty() {
            return Err(ScheduleError::Denied("a worker key is a user's: log in as one (`xq login`)".to_owned()));
        }
        let key = new_token();
        let hash = token_hash(&key);
        let id = token_id(&hash).to_owned();
        self.put_in_force(hash, Principal::WorkerKey, name, 0, user).await?;
        self.audit(actor, "worker-key.create", &format!("{id} '{name}' of {user}")).await?;
        Ok((key, id))
    }

    /// Enrolls the machine `machine_id` with the worker key whose hash is `key_hash`:
    /// a new worker the first time, the same worker after that, with a new worker token
    /// (its earlier ones revoked). Its worker id and token.
    pub async fn enroll_machine(
        &self,
        key_hash: &str,
        machine_id: &str,
        name: &str,
    ) -> Result<(u64, String), ScheduleError> {
        check_machine_id(machine_id)?;
        check_label("name", name)?;
        let (user, known) = {
            let state = self.lock();
            let key = state.tokens.get(key_hash).filter(|key| key.principal == Ok(Principal::WorkerKey));
            let Some(key) = key.filter(|key| key.expires_ms == 0 || now_ms() < key.expires_ms) else {
                return Err(ScheduleError::Denied("unknown or revoked worker key".to_owned()));
            };
            let known = state.machines.get(&(key_hash.to_owned(), machine_id.to_owned())).copied();
            let enrolled = state.machines.keys().filter(|(key, _)| key == key_hash).count();
            if known.is_none() && enrolled >= self.config.machines_per_key {
                return Err(ScheduleError::Denied(format!(
                    "this key has enrolled {enrolled} machines, the most one key may; make another key or retire one"
                )));
            }
            (key.user.clone(), known)
        };
        match known {
            Some(worker) => {
                for id in self.worker_token_ids(worker) {
                    self.revoke_token(&id, token_id(key_hash)).await?;
                }
                let token = new_token();
                self.put_in_force(token_hash(&token), Principal::Worker(worker), name, 0, &user).await?;
                Ok((worker, token))
            }
            None => {
                let (worker, token) = self.create_worker(name, &user).await?;
                let row = MachineRow {
                    key_hash: key_hash.to_owned(),
                    machine_id: machine_id.to_owned(),
                    worker_id: worker as i64,
                    user: user.clone(),
                };
                self.writer.write(Change::Machine(row)).await?;
                self.lock().machines.insert((key_hash.to_owned(), machine_id.to_owned()), worker);
                self.audit(token_id(key_hash), "machine.enroll", &format!("worker {worker} '{name}' of {user}"))
                    .await?;
                Ok((worker, token))
            }
        }
    }

    /// Retires the machine `worker` of `user` (any user's for an admin): its tokens
    /// revoked, the worker disabled, its counted work kept.
    pub async fn retire_machine(
        &self,
        worker: u64,
        user: &str,
        admin: bool,
        actor: &str,
    ) -> Result<v1::WorkerInfo, ScheduleError> {
        let owner = self.lock().workers.get(&worker).map(|w| w.user.clone());
        match owner {
            None => return Err(ScheduleError::NotFound(format!("no worker {worker}"))),
            Some(owner) if !admin && (owner.is_empty() || owner != user) => {
                return Err(ScheduleError::Denied(format!("worker {worker} is not one of your machines")));
            }
            Some(_) => {}
        }
        for id in self.worker_token_ids(worker) {
            self.revoke_token(&id, actor).await?;
        }
        let who = if user.is_empty() { actor } else { user };
        self.set_standing(worker, crate::scheduler::DISABLED, &format!("retired by {who}")).await
    }

    /// The ids of the worker tokens in force of `worker`.
    pub(super) fn worker_token_ids(&self, worker: u64) -> Vec<String> {
        self.token_ids(|token| token.principal == Ok(Principal::Worker(worker)))
    }

    /// The workers a key enrolled.
    pub(super) fn machines_of_key(&self, key_hash: &str) -> Vec<u64> {
        let state = self.lock();
        state.machines.iter().filter(|((key, _), _)| key == key_hash).map(|(_, worker)| *worker).collect()
    }
}
