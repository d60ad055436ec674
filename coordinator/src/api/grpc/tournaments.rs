//! Tournaments through the services: created, read with their standings, advanced a
//! round at a time, stopped, their games downloaded.

use crate::access::caller::Caller;
use crate::access::tokens::Role;
use crate::api::grpc::downloads::Stored;
use crate::api::grpc::{Shared, Stream_};
use crate::jobs::JobSpec;
use crate::jobs::tournament::{EventState, ExtendError, PairingResults};
use crate::scheduler::{RequestKey, ScheduleError};
use std::sync::Arc;
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tonic::Status;
use xq_proto::v1;

impl Shared {
    /// The event `caller` made under `key`'s request id, if any.
    pub(super) fn own_event_named(
        &self,
        caller: &Caller,
        key: &RequestKey,
    ) -> Option<crate::storage::rows::TournamentRow> {
        self.tournaments.named(&key.id).into_iter().find(|row| self.event_owner(row) == caller.token_id)
    }

    /// The tournament an earlier call named by `key` made for `caller`: a retry's
    /// answer, looked for before the quota that the first call used. The name used for
    /// another request, or for a job, is refused, naming what it made.
    pub(super) fn tournament_created_before(&self, caller: &Caller, key: &RequestKey) -> Result<Option<u64>, Status> {
        if let Some(job) = self.scheduler.created_before(&caller.token_id, key)? {
            return Err(Status::invalid_argument(format!(
                "request id '{}' made job {}: a new request needs a new id",
                key.id, job.job_id
            )));
        }
        match self.own_event_named(caller, key) {
            None => Ok(None),
            Some(event) if event.request_digest == key.digest => Ok(Some(event.id as u64)),
            Some(event) => Err(Status::invalid_argument(format!(
                "request id '{}' made tournament {} from another request: a new request needs a new id",
                key.id, event.id
            ))),
        }
    }

    /// Creates a tournament for `caller` with its first tests, all stored together or
    /// none (see [`Tournaments::add`]); one named by `key` is made once per request id
    /// (a retry gets the event the first call made).
    pub async fn create_tournament(
        &self,
        caller: &Caller,
        key: Option<&RequestKey>,
        request: v1::CreateTournamentRequest,
    ) -> Result<v1::Tournament, Status> {
        let _named = match key {
            Some(key) => {
                let guard = self.tournaments.named_creation().await;
                if let Some(id) = self.tournament_created_before(caller, key)? {
                    return self.tournament(id).await;
                }
                Some(guard)
            }
            None => None,
        };
        let tests = crate::jobs::tournament::plan(&request).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let waits = self.origin(caller, None).pending;
        let tests = self.new_tests(caller, tests.into_iter().map(|test| (test, waits)).collect()).await?;
        let id = self
            .tournaments
            .add(&request, key, tests, &self.scheduler)
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        self.tournament(id).await
    }

    /// The newest `limit` tournaments (0: 100, at most 1,000), each as [`Self::tournament`].
    pub async fn tournaments(&self, limit: u32) -> Result<v1::ListTournamentsReply, Status> {
        let limit = if limit == 0 { 100 } else { limit.min(1_000) } as usize;
        let mut tournaments = Vec::new();
        for id in self.tournaments.newest(limit) {
            // One event that cannot be shown does not hide the others: it is listed,
            // saying why.
            match self.tournament(id).await {
                Ok(tournament) => tournaments.push(tournament),
                Err(status) if status.code() == tonic::Code::FailedPrecondition => {
                    let created_ms = self.tournaments.get(id).map_or(0, |row| row.created_ms);
                    tournaments.push(v1::Tournament {
                        tournament_id: id,
                        state: "unreadable".to_owned(),
                        created_ms,
                        problem: status.message().to_owned(),
                        ..Default::default()
                    });
                }
                Err(status) => return Err(status),
            }
        }
        Ok(v1::ListTournamentsReply { tournaments })
    }

    /// A tournament's pairings and standings, from its tests' counted pairs.
    pub async fn tournament(&self, id: u64) -> Result<v1::Tournament, Status> {
        let row = self.tournaments.get(id).ok_or_else(|| Status::not_found(format!("tournament {id}")))?;
        let results = self.pairing_results(&row).await?;
        crate::jobs::tournament::view(&row, &results).map_err(Status::internal)
    }

    pub(super) async fn pairing_results(
        &self,
        row: &crate::storage::rows::TournamentRow,
    ) -> Result<Vec<PairingResults>, Status> {
        let mut results = Vec::with_capacity(row.job_ids.len());
        for &job_id in &row.job_ids {
            let event = row.id;
            let job = self.scheduler.job(job_id).ok_or_else(|| {
                Status::failed_precondition(format!("tournament {event}: its test {job_id} is not stored"))
            })?;
            // A test this version cannot read back is shown stopped, with the reason,
            // when its engines are known; without them its pairing cannot be placed.
            if let Some(JobSpec::Unreadable(unreadable)) = self.scheduler.spec(job_id).as_deref()
                && unreadable.request.is_none()
            {
                return Err(Status::failed_precondition(format!(
                    "tournament {event}: its test {job_id} cannot be read back by this version: {}",
                    unreadable.problem
                )));
            }
            let pairs = match self.pair_points.get(&job) {
                Some(pairs) => pairs,
                None => {
                    let read = self.storage.pair_points(job_id as i64).await;
                    let pairs = Arc::new(
                        read.map_err(|e| Status::unavailable(e.to_string()))?.into_iter().map(|(_, p)| p).collect(),
                    );
                    self.pair_points.keep(&job, Arc::clone(&pairs));
                    pairs
                }
            };
            results.push(PairingResults { job, pairs });
        }
        Ok(results)
    }

    /// Looks after every event not yet over, each on its own (one event's trouble does
    /// not hold up the others): an event stopped, or one of whose tests ended without
    /// finishing, stops its other tests and makes no more; a Swiss event or knockout
    /// whose tests all finished makes its next round or tie-breaks. Returns the events
    /// that made new tests, and those that could not be looked after, with the reason.
    pub async fn advance_staged_events(&self) -> (Vec<u64>, Vec<(u64, Status)>) {
        let (mut advanced, mut failed) = (Vec::new(), Vec::new());
        for id in self.tournaments.open_ids() {
            match self.tend_event(id).await {
                Ok(true) => advanced.push(id),
                Ok(false) => {}
                Err(status) => failed.push((id, status)),
            }
        }
        (advanced, failed)
    }

    /// Looks after event `id` (see [`Self::advance_staged_events`]); whether it made tests.
    pub(super) async fn tend_event(&self, id: u64) -> Result<bool, Status> {
        let Some(row) = self.tournaments.get(id) else { return Ok(false) };
        // A test that is gone (a database edited by hand) stops its event.
        let states: Vec<String> =
            row.job_ids.iter().map(|&job| self.scheduler.job(job).map_or_else(String::new, |j| j.state)).collect();
        match crate::jobs::tournament::event_state(&row, states.iter().map(String::as_str)) {
            EventState::Playing => Ok(false),
            EventState::Stopped => {
                self.stop_event_tests(&row).await?;
                self.tournaments.conclude(id);
                Ok(false)
            }
            EventState::Settled => self.make_next_tests(&row).await,
        }
    }

    /// Makes the tests that follow in a settled event: a Swiss round, or a knockout's
    /// tie-breaks or next round (see [`crate::jobs::tournament::FollowUp`]), for the token
    /// that made its first tests as that token would make them: under its quotas and,
    /// for a submitter on a coordinator that asks for approval, waiting for it when no
    /// approved test covers them. An event with nothing to follow is over.
    pub(super) async fn make_next_tests(&self, row: &crate::storage::rows::TournamentRow) -> Result<bool, Status> {
        let id = row.id as u64;
        let results = self.pairing_results(row).await?;
        let Some(tests) = crate::jobs::tournament::next_round_tests(row, &results).map_err(Status::internal)? else {
            self.tournaments.conclude(id);
            return Ok(false);
        };
        let owner = self.event_owner(row);
        // A token no longer in force makes no more rounds: its event is over (review
        // of 2026-11-28, F11).
        let Some(role) = self.scheduler.role_of(&owner) else {
            self.tournaments.stop(id).await.map_err(|e| Status::unavailable(e.to_string()))?;
            self.tournaments.conclude(id);
            return Ok(false);
        };
        let caller = Caller { role, token_id: owner };
        // The whole round within the maker's limit of active jobs, or none of it: a
        // round refused halfway would make and stop tests at every look.
        let limit = self.scheduler.config.submitter_active_jobs;
        let active = self.scheduler.active_jobs_of(&caller.token_id);
        if role != Role::Admin && limit > 0 && active + tests.len() > limit {
            return Err(Status::resource_exhausted(format!(
                "the next {} tests wait: submitter {} has {active} running or pending jobs of at most {limit}",
                tests.len(),
                caller.token_id
            )));
        }
        let approval_asked = self.origin(&caller, None).pending;
        let tests = tests.into_iter().map(|f| (f.test, approval_asked && f.unplayed_engine)).collect();
        let tests = self.new_tests(&caller, tests).await?;
        match self.tournaments.extend(id, tests, &self.scheduler).await {
            Ok(()) => Ok(true),
            // None of the round was made: a stop ends the event at the next look, a
            // write error makes the round again then.
            Err(ExtendError::Stopped(_)) => Ok(false),
            Err(ExtendError::Write(error)) => Err(Status::unavailable(error.to_string())),
        }
    }

    /// The token that made the event's first tests, whose event it is.
    pub(super) fn event_owner(&self, row: &crate::storage::rows::TournamentRow) -> String {
        row.job_ids.first().and_then(|&job| self.scheduler.submitter(job)).unwrap_or_default()
    }

    /// Stops tournament `id` for `caller` (an admin, or the token that made it): it
    /// makes no more tests, and its tests that wait or play stop.
    pub async fn stop_tournament(&self, caller: &Caller, id: u64) -> Result<v1::Tournament, Status> {
        let not_found = || Status::not_found(format!("tournament {id}"));
        let row = self.tournaments.get(id).ok_or_else(not_found)?;
        if caller.role != Role::Admin && self.event_owner(&row) != caller.token_id {
            return Err(Status::permission_denied(format!(
                "tournament {id} is another submitter's: they or an admin may stop it"
            )));
        }
        let row =
            self.tournaments.stop(id).await.map_err(|e| Status::unavailable(e.to_string()))?.ok_or_else(not_found)?;
        self.stop_event_tests(&row).await?;
        self.tournaments.conclude(id);
        self.scheduler.audit(&caller.token_id, "tournament.stop", &id.to_string()).await?;
        self.tournament(id).await
    }

    /// Revokes the token `id` for the admin `actor`, and ends what it set going: its jobs
    /// that run or wait stop, and its events make no more rounds (review of 2026-11-28,
    /// F11: a revoked submitter's tests played on and its events made rounds).
    pub async fn revoke_token(&self, id: &str, actor: &str) -> Result<(), Status> {
        self.scheduler.revoke_token(id, actor).await?;
        for event in self.tournaments.open_ids() {
            if let Some(row) = self.tournaments.get(event)
                && self.event_owner(&row) == id
            {
                self.tournaments.stop(event).await.map_err(|e| Status::unavailable(e.to_string()))?;
                self.tournaments.conclude(event);
            }
        }
        for job in self.scheduler.live_jobs_of(id) {
            match self.scheduler.end_job(job, "stopped", "its submitter's token was revoked").await {
                Ok(_) | Err(ScheduleError::NotFound(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// Stops the tests of a stopped event that still wait or play, saying why.
    pub(super) async fn stop_event_tests(&self, row: &crate::storage::rows::TournamentRow) -> Result<(), Status> {
        let outcome = format!("tournament {} stopped", row.id);
        for &job in &row.job_ids {
            match self.scheduler.end_job(job, "stopped", &outcome).await {
                Ok(_) | Err(ScheduleError::NotFound(_)) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// Every game of tournament `id` as PGN, pairing after pairing in the event's order,
    /// each game's `[Event]` the event's name and `[Round]` its round and number in its
    /// match. Refused at once when a pairing's games cannot be read (removed under the
    /// retention settings), rather than cut short midway.
    pub async fn tournament_games(&self, id: u64) -> Result<Stream_<String>, Status> {
        let tournament = self.tournament(id).await?;
        for pairing in &tournament.pairings {
            self.units_readable(pairing.job_id, Stored::Games)?;
        }
        let event =
            if tournament.description.is_empty() { format!("tournament {id}") } else { tournament.description.clone() };
        let shared = self.clone();
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        tokio::spawn(async move {
            let mut numbering = crate::jobs::tournament::GameNumbering::default();
            for pairing in tournament.pairings {
                let mut units = match shared.unit_bytes(pairing.job_id, Stored::Games) {
                    Ok(units) => units,
                    Err(status) => {
                        let _ = sender.send(Err(status)).await;
                        return;
                    }
                };
                while let Some(unit) = units.next().await {
                    let item = unit.map(|(_, bytes)| numbering.tag(&String::from_utf8_lossy(&bytes), &event, &pairing));
                    let failed = item.is_err();
                    if sender.send(item).await.is_err() || failed {
                        return;
                    }
                }
            }
        });
        Ok(Box::pin(ReceiverStream::new(receiver)))
    }
}
