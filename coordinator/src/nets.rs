//! The net registry: the nets a training loop produced, generation by generation, each
//! with its parent, the self-play job it learnt from, its losses and the match test
//! that decides its promotion. A net's state is not stored but read off its test job
//! (running: testing; H1 accepted: promoted; any other end: rejected), so that the
//! registry can never disagree with the test. A lineage may start from a seed, a net
//! trained elsewhere (the engine's embedded one), recorded as its generation 0.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use xq_proto::v1;

use crate::access::caller::Caller;
use crate::access::tokens::Role;
use crate::jobs::JobSpec;
use crate::jobs::checks::check_lineage;
use crate::scheduler::{ScheduleError, Scheduler};
use crate::storage::changes::Change;
use crate::storage::now_ms;
use crate::storage::rows::NetRow;
use crate::storage::writer::Writer;

/// The longest description: the engine's own limit on a net's description.
const MAX_DESCRIPTION: usize = 65_536;

/// The nets, in memory, written through to the database.
pub struct Nets {
    /// What is durable: a change enters only after the database has it.
    rows: Mutex<BTreeMap<u64, NetRow>>,
    /// Serialises changes from their checks to their entry in `rows`, across the
    /// write's await, so that no change is checked against a state another one is
    /// about to replace (changes are a few per generation; nothing waits on them).
    changes: tokio::sync::Mutex<()>,
    writer: Writer,
}

/// An uploaded artifact as the coordinator indexed it: name, kind, size.
pub type Indexed = (String, String, u64);

fn invalid(message: String) -> ScheduleError {
    ScheduleError::Invalid(message)
}

/// Refuses `caller` a change to `lineage` unless it is an admin or the lineage's owner
/// (the token that recorded its first net). A lineage recorded before owners were
/// kept takes changes from admins only.
fn may_change(rows: &BTreeMap<u64, NetRow>, lineage: &str, caller: &Caller) -> Result<(), ScheduleError> {
    let Some(first) = rows.values().find(|r| r.lineage == lineage) else { return Ok(()) };
    if caller.role == Role::Admin || (!first.owner.is_empty() && first.owner == caller.token_id) {
        return Ok(());
    }
    Err(ScheduleError::Denied(match first.owner.as_str() {
        "" => format!("lineage {lineage} has no recorded owner: only an admin may change it"),
        owner => format!("lineage {lineage} belongs to token {owner}: only it or an admin may change it"),
    }))
}

/// What a test job says of the net it tests; a lineage's generation 0 is its seed,
/// a net made elsewhere that the lineage starts from instead of the handcrafted
/// evaluation, and is not tested.
fn state_of(row: &NetRow, scheduler: &Scheduler) -> &'static str {
    if row.generation == 0 {
        return "seed";
    }
    if row.test_job_id == 0 {
        return "untested";
    }
    match scheduler.job(row.test_job_id as u64) {
        Some(job) if job.state == "running" => "testing",
        Some(job) if job.outcome == "H1 accepted" => "promoted",
        _ => "rejected",
    }
}

fn view(row: &NetRow, scheduler: &Scheduler) -> v1::Net {
    v1::Net {
        net_id: row.id as u64,
        artifact: Some(v1::ArtifactRef { sha256: row.sha256.clone(), name: row.name.clone(), size: row.size as u64 }),
        lineage: row.lineage.clone(),
        generation: row.generation as u32,
        parent_id: row.parent_id as u64,
        data_job_id: row.data_job_id as u64,
        test_job_id: row.test_job_id as u64,
        train_loss: row.train_loss,
        validation_loss: row.validation_loss,
        positions: row.positions as u64,
        epochs: row.epochs as u32,
        state: state_of(row, scheduler).to_owned(),
        description: row.description.clone(),
        created_ms: row.created_ms,
    }
}

impl Nets {
    /// The registry as stored.
    pub fn new(rows: Vec<NetRow>, writer: Writer) -> Self {
        Nets {
            rows: Mutex::new(rows.into_iter().map(|r| (r.id as u64, r)).collect()),
            changes: tokio::sync::Mutex::new(()),
            writer,
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, NetRow>> {
        self.rows.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records a net; `artifact` is how the coordinator indexed the request's artifact,
    /// if it did. The same net again for its lineage and generation returns the stored
    /// record, so that a loop resumed after a crash can simply repeat the call.
    pub async fn add(
        &self,
        request: &v1::AddNetRequest,
        artifact: Option<Indexed>,
        scheduler: &Scheduler,
        caller: &Caller,
    ) -> Result<v1::Net, ScheduleError> {
        let sha256 = request.artifact.as_ref().map(|a| a.sha256.clone()).unwrap_or_default();
        let Some((name, kind, size)) = artifact else {
            return Err(invalid(format!("artifact '{sha256}' has not been uploaded")));
        };
        if kind != "net" {
            return Err(invalid(format!("artifact {name} is a {kind}, not a net")));
        }
        let lineage = &request.lineage;
        check_lineage("lineage", lineage).map_err(|e| invalid(e.to_string()))?;
        if request.generation == 0 && (request.parent_id != 0 || request.data_job_id != 0) {
            return Err(invalid(
                "generation 0 is the lineage's seed, a net trained elsewhere: it has no parent and no data job"
                    .to_owned(),
            ));
        }
        for (field, loss) in [("train_loss", request.train_loss), ("validation_loss", request.validation_loss)] {
            if !loss.is_finite() || loss < 0.0 {
                return Err(invalid(format!("{field} {loss}: a loss is finite and not negative")));
            }
        }
        if request.description.len() > MAX_DESCRIPTION || request.description.chars().any(|c| c.is_control()) {
            return Err(invalid(format!("description: at most {MAX_DESCRIPTION} characters, no control characters")));
        }
        if request.generation > 0
            && !matches!(scheduler.spec(request.data_job_id).as_deref(), Some(JobSpec::SelfPlay(_)))
        {
            return Err(invalid(format!("data job {}: no such self-play job", request.data_job_id)));
        }
        let generation = i64::from(request.generation);
        let _change = self.changes.lock().await;
        let row = {
            let rows = self.lock();
            may_change(&rows, lineage, caller)?;
            // The same call again (a resumed loop) is answered before anything that
            // changed since, such as its parent's promotion, is looked at.
            if let Some(stored) = rows.values().find(|r| r.lineage == *lineage && r.generation == generation) {
                if stored.sha256 == sha256
                    && stored.parent_id as u64 == request.parent_id
                    && stored.data_job_id as u64 == request.data_job_id
                {
                    return Ok(view(stored, scheduler));
                }
                return Err(invalid(format!(
                    "lineage {lineage} already has generation {generation}: net {} ({}, parent {}, data job {})",
                    stored.id, stored.name, stored.parent_id, stored.data_job_id
                )));
            }
            if request.parent_id != 0 {
                match rows.get(&request.parent_id) {
                    Some(parent) if parent.lineage == *lineage && parent.generation < generation => {}
                    Some(_) => {
                        return Err(invalid(format!(
                            "parent net {} is not an earlier generation of lineage {lineage}",
                            request.parent_id
                        )));
                    }
                    None => return Err(invalid(format!("parent net {}: no such net", request.parent_id))),
                }
            }
            let id = rows.keys().next_back().map_or(1, |last| last + 1);
            NetRow {
                id: id as i64,
                sha256,
                name,
                size: size as i64,
                lineage: lineage.clone(),
                generation,
                parent_id: request.parent_id as i64,
                data_job_id: request.data_job_id as i64,
                test_job_id: 0,
                train_loss: request.train_loss,
                validation_loss: request.validation_loss,
                positions: request.positions as i64,
                epochs: i64::from(request.epochs),
                description: request.description.clone(),
                created_ms: now_ms(),
                owner: caller.token_id.clone(),
            }
        };
        self.writer.write(Change::Net(Box::new(row.clone()))).await?;
        self.lock().insert(row.id as u64, row.clone());
        Ok(view(&row, scheduler))
    }

    /// Names the test deciding a net: a match whose new engine carries the net, and
    /// whose base carries its parent when it has one. A net's test is replaced only if
    /// the old one was stopped before it decided.
    pub async fn set_test(
        &self,
        net_id: u64,
        test_job_id: u64,
        scheduler: &Scheduler,
        caller: &Caller,
    ) -> Result<v1::Net, ScheduleError> {
        let spec = scheduler.spec(test_job_id);
        let Some(JobSpec::Match(test)) = spec.as_deref() else {
            return Err(invalid(format!("test job {test_job_id}: no such match test")));
        };
        if test.request.sprt.is_none() {
            return Err(invalid(format!(
                "test job {test_job_id}: a fixed-game test cannot promote a net: an SPRT can"
            )));
        }
        let net_of =
            |engine: &Option<v1::EngineSpec>| engine.as_ref().and_then(|e| e.net.as_ref()).map(|n| n.sha256.clone());
        let _change = self.changes.lock().await;
        let row = {
            let rows = self.lock();
            let net = rows.get(&net_id).ok_or_else(|| ScheduleError::NotFound(format!("net {net_id}")))?;
            may_change(&rows, &net.lineage, caller)?;
            if net.test_job_id as u64 == test_job_id {
                return Ok(view(net, scheduler));
            }
            if net.generation == 0 {
                return Err(invalid(format!(
                    "net {net_id} is lineage {}'s seed (generation 0): its children are tested against it",
                    net.lineage
                )));
            }
            if net_of(&test.request.new_engine).as_deref() != Some(net.sha256.as_str()) {
                return Err(invalid(format!("test job {test_job_id}: its new engine does not carry net {net_id}")));
            }
            // Without a parent the base plays without a net: the handcrafted evaluation.
            let parent_sha = rows.get(&(net.parent_id as u64)).map(|p| p.sha256.clone());
            if net_of(&test.request.base_engine) != parent_sha {
                return Err(invalid(match net.parent_id {
                    0 => format!(
                        "test job {test_job_id}: its base engine carries a net, but net {net_id} has no parent: \
                         its base is the engine without a net"
                    ),
                    parent => {
                        format!("test job {test_job_id}: its base engine does not carry net {parent}, the parent")
                    }
                }));
            }
            if net.test_job_id != 0 && scheduler.job(net.test_job_id as u64).is_some_and(|j| j.state != "stopped") {
                return Err(invalid(format!(
                    "net {net_id} is already decided by test job {}, which was not stopped",
                    net.test_job_id
                )));
            }
            NetRow { test_job_id: test_job_id as i64, ..net.clone() }
        };
        self.writer.write(Change::Net(Box::new(row.clone()))).await?;
        self.lock().insert(net_id, row.clone());
        Ok(view(&row, scheduler))
    }

    /// Refuses `caller` a job marked as `lineage`'s (the loop's self-play and tests,
    /// which its page shows as its generation in progress) unless it may change the
    /// lineage: its owner or an admin. A lineage with no net yet is anyone's.
    pub fn may_mark_job(&self, lineage: &str, caller: &Caller) -> Result<(), ScheduleError> {
        may_change(&self.lock(), lineage, caller)
    }

    /// The nets, newest first; of one lineage when `lineage` is not empty.
    pub fn list(&self, lineage: &str, scheduler: &Scheduler) -> Vec<v1::Net> {
        let rows = self.lock();
        rows.values().rev().filter(|r| lineage.is_empty() || r.lineage == lineage).map(|r| view(r, scheduler)).collect()
    }
}
