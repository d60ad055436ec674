//! Tournaments across the fleet: each pairing of a double round robin or a gauntlet is
//! a match test of its own (game pairs, colours swapped on each opening), leased,
//! played, checked and counted as any test is, so that nothing about workers or
//! reports changes; the tournament keeps its tests' ids and places its engines from
//! their counted pairs by Articles 9 and 10 of the World Xiangqi Rules
//! ([`xq_tournament`]), with ratings over all its games ([`xq_stats::ratings`]).
//! Standings are never stored: they are computed from the tests' results when asked.
//!
//! Swiss events and knockouts make their first round's tests at once and the tests that
//! follow when those before have all finished ([`next_round_tests`], which the
//! coordinator asks every second): a Swiss event's next round, a knockout's tie-break
//! pairs and next round. Only the tests' ids are stored: pairing is deterministic, so
//! rounds, byes and brackets are rebuilt from the results in order ([`swiss_progress`],
//! [`knockout_progress`]). A fleet pairing plays game pairs, so each meeting gives both
//! engines both colours and the Swiss colour rules never bind.
//!
//! An event is its creator's throughout: the tests that follow are made for the token
//! that made the first ones, under its quotas, and wait for an admin's approval as its
//! first tests did, unless that approval already covers them ([`FollowUp`]). An event is
//! stopped as a whole (StopTournament), or by stopping any of its tests: a round without
//! all its results cannot be paired on, and a stopped test must not be a way round the
//! approval of its round ([`EventState`]).
//!
//! An event is stored with its first tests in one transaction, and each later round
//! with the event's new list of tests, so that a crash leaves an event or a round whole
//! or not at all ([`Tournaments::add`], [`Tournaments::extend`]); a creation its client
//! names (`xq-request-id`) makes one event however often it is sent.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use prost::Message;
use xq_proto::v1;
use xq_stats::ratings::{RatedGame, event_ratings};
use xq_tournament::pairing::{
    Pairing, Round, gauntlet, knockout_bracket, knockout_winner, next_knockout_round, round_robin,
};
use xq_tournament::scoring::{GameResult, Points};
use xq_tournament::standings::{Game, System, standings_with_byes};
use xq_tournament::swiss::{Entrant, default_rounds, max_rounds, pair_round};

use crate::jobs::checks::{SpecError, bad};
use crate::jobs::test::{MatchJob, check_test};
use crate::scheduler::{NewJob, PENDING, RequestKey, Scheduler};
use crate::storage::changes::Change;
use crate::storage::now_ms;
use crate::storage::rows::TournamentRow;
use crate::storage::writer::{WriteError, Writer};

/// The most engines in a tournament.
pub const MAX_ENGINES: usize = 64;

/// The most games a pairing plays (a knockout's match before its tie-breaks).
pub const MAX_GAMES_PER_PAIRING: u32 = 10_000;

/// The most tie-break pairs a level knockout match plays.
pub const MAX_TIE_BREAK_PAIRS: u32 = 100;

/// The most tests one event may make, every round and tie-break played: each is a job
/// the scheduler keeps and the event's view reads (a double round robin of 45 engines
/// makes 990).
pub const MAX_TESTS: u64 = 1_000;

/// The most games one event may make, every round and tie-break played, so that one
/// request cannot hold the fleet for weeks (a double round robin of 32 engines at
/// 2,000 games a pairing makes 992,000).
pub const MAX_GAMES: u64 = 1_000_000;

fn points_of(text: &str) -> Result<Points, SpecError> {
    match text {
        "" | "2-1-0" => Ok(Points::TwoOneZero),
        "1-0.5-0" => Ok(Points::OneHalfZero),
        other => Err(bad("points", format!("'{other}': 2-1-0 or 1-0.5-0"))),
    }
}

/// Checks a tournament request and plans the tests to make first, in pairing order:
/// every pairing's, or a Swiss event's or knockout's first round.
pub fn plan(request: &v1::CreateTournamentRequest) -> Result<Vec<MatchJob>, SpecError> {
    let engines = &request.engines;
    if !(2..=MAX_ENGINES).contains(&engines.len()) {
        return Err(bad("engines", format!("{} engines: between 2 and {MAX_ENGINES}", engines.len())));
    }
    for (i, engine) in engines.iter().enumerate() {
        if engines[..i].iter().any(|e| e.name == engine.name) {
            return Err(bad("engines", format!("two engines are named '{}'", engine.name)));
        }
    }
    let settings = request.settings.as_ref().ok_or_else(|| bad("settings", "missing"))?;
    if settings.new_engine.is_some() || settings.base_engine.is_some() || settings.sprt.is_some() || settings.pairs != 0
    {
        return Err(bad("settings", "engines, sprt and pairs come from the tournament: leave them out"));
    }
    let games = games_per_pairing(request);
    if !games.is_multiple_of(2) || games > MAX_GAMES_PER_PAIRING {
        return Err(bad(
            "games_per_pairing",
            format!("an even number, at most {MAX_GAMES_PER_PAIRING}: game pairs with colours swapped"),
        ));
    }
    let n = engines.len() as u64;
    let (pairings, most_tests): (Vec<Pairing>, u64) = match request.system.as_str() {
        "" | "double-round-robin" => {
            (round_robin(engines.len(), false).into_iter().flat_map(|r| r.games).collect(), n * (n - 1) / 2)
        }
        "gauntlet" => {
            let challengers = request.challengers as usize;
            if challengers == 0 || challengers >= engines.len() {
                return Err(bad("challengers", format!("1 to {}: the rest is the field", engines.len() - 1)));
            }
            let c = challengers as u64;
            (gauntlet(challengers, engines.len() - challengers, 1), c * (n - c))
        }
        "swiss" => {
            if request.rounds as usize > max_rounds(engines.len()) {
                let most = max_rounds(engines.len());
                return Err(bad("rounds", format!("at most {most}: no two engines meet twice")));
            }
            let first = pair_round(&vec![Entrant::default(); engines.len()]).expect("a first round always pairs");
            (first.games, swiss_rounds(request) as u64 * (n / 2))
        }
        "knockout" => {
            if request.tie_break_pairs > MAX_TIE_BREAK_PAIRS {
                return Err(bad("tie_break_pairs", format!("at most {MAX_TIE_BREAK_PAIRS}")));
            }
            let first = knockout_bracket(engines.len()).into_iter();
            // Each of the n - 1 matches, and each of its tie-breaks.
            let most = (n - 1) * (1 + u64::from(request.tie_break_pairs));
            (first.filter_map(|(a, b)| b.map(|b| Pairing { red: a, black: b })).collect(), most)
        }
        other => return Err(bad("system", format!("'{other}': double-round-robin, gauntlet, swiss or knockout"))),
    };
    if most_tests > MAX_TESTS {
        return Err(bad(
            "engines",
            format!(
                "{n} engines make up to {most_tests} tests in this system, every round and tie-break played; \
                 at most {MAX_TESTS} tests an event: fewer engines, rounds or tie-break pairs"
            ),
        ));
    }
    let most_games = match request.system.as_str() {
        // A tie-break is one game pair.
        "knockout" => (n - 1) * (u64::from(games) + 2 * u64::from(request.tie_break_pairs)),
        _ => most_tests * u64::from(games),
    };
    if most_games > MAX_GAMES {
        return Err(bad(
            "games_per_pairing",
            format!("{games} games a pairing make up to {most_games} games in this event, at most {MAX_GAMES}"),
        ));
    }
    // Every engine is checked now as its tests will check it: one that sits out the
    // first round would otherwise be refused only when a later round is made.
    for (i, engine) in engines.iter().enumerate() {
        let pairing = Pairing { red: i, black: usize::from(i == 0) };
        pairing_test(request, pairing, 1, false).map_err(|e| match e.field {
            "new_engine" => bad("engines", format!("'{}': {}", engine.name, e.problem)),
            _ => e,
        })?;
    }
    if !request.tie_break_time_control.is_empty() {
        let pairing = Pairing { red: 0, black: 1 };
        pairing_test(request, pairing, 1, true).map_err(|e| bad("tie_break_time_control", e.problem))?;
    }
    points_of(&request.points)?;
    let pairs = u64::from(games / 2);
    pairings.into_iter().map(|pairing| pairing_test(request, pairing, pairs, false)).collect()
}

/// The test of one pairing: `pairs` game pairs, the first engine named "new"; a
/// knockout's tie-break at its own time control.
fn pairing_test(
    request: &v1::CreateTournamentRequest,
    pairing: Pairing,
    pairs: u64,
    tie_break: bool,
) -> Result<MatchJob, SpecError> {
    let mut settings = request.settings.clone().unwrap_or_default();
    let (red, black) = (&request.engines[pairing.red], &request.engines[pairing.black]);
    let label = if settings.description.is_empty() { "tournament".to_owned() } else { settings.description.clone() };
    let mut description = format!("{label}: {} vs {}", red.name, black.name);
    if tie_break {
        description.push_str(", tie-break");
        if !request.tie_break_time_control.is_empty() {
            settings.time_control = request.tie_break_time_control.clone();
        }
    }
    let test = v1::CreateTestRequest {
        new_engine: Some(red.clone()),
        base_engine: Some(black.clone()),
        pairs,
        description,
        ..settings
    };
    check_test(&test)
}

fn swiss_rounds(request: &v1::CreateTournamentRequest) -> usize {
    match request.rounds {
        0 => default_rounds(request.engines.len()),
        rounds => rounds as usize,
    }
}

fn games_per_pairing(request: &v1::CreateTournamentRequest) -> u32 {
    if request.games_per_pairing == 0 { 2 } else { request.games_per_pairing }
}

/// A Swiss event as its tests stand, rebuilt from their results in order.
pub struct SwissProgress {
    /// The rounds paired so far, the last perhaps still in play.
    pub rounds: Vec<Round>,
    /// Whether every test of those rounds has ended.
    pub settled: bool,
    /// The engines' records over the ended rounds, as the pairing algorithm reads them.
    entrants: Vec<Entrant>,
}

/// Replays the pairing of each round from the results before it; `results` are the
/// event's tests in the order they were made.
pub fn swiss_progress(
    request: &v1::CreateTournamentRequest,
    results: &[PairingResults],
    points: Points,
) -> Result<SwissProgress, String> {
    let mut entrants = vec![Entrant::default(); request.engines.len()];
    let mut rounds = Vec::new();
    let mut next = 0;
    while next < results.len() {
        let round = pair_round(&entrants).ok_or("the results before a round leave it no pairing")?;
        let tests = results.get(next..next + round.games.len()).ok_or("a round has fewer tests than pairings")?;
        next += round.games.len();
        for (pairing, test) in round.games.iter().zip(tests) {
            let (red, black) = (&request.engines[pairing.red].name, &request.engines[pairing.black].name);
            if (&test.job.new_engine, &test.job.base_engine) != (red, black) {
                return Err(format!("job {} does not play the pairing {red} - {black}", test.job.job_id));
            }
        }
        let ended = tests.iter().all(|t| !matches!(t.job.state.as_str(), "running" | "pending"));
        if ended {
            record_meetings(&mut entrants, &round, tests, points, games_per_pairing(request));
        }
        rounds.push(round);
        if !ended {
            return Ok(SwissProgress { rounds, settled: false, entrants });
        }
    }
    Ok(SwissProgress { rounds, settled: true, entrants })
}

/// Adds a round's meetings (each a match of game pairs: both colours for both) and its
/// bye (a win's points for every game of a meeting) to the records.
fn record_meetings(entrants: &mut [Entrant], round: &Round, tests: &[PairingResults], points: Points, games: u32) {
    for (pairing, test) in round.games.iter().zip(tests) {
        let (first, second) = meeting_points(&test.pairs, points);
        for (player, opponent, scored, colours) in
            [(pairing.red, pairing.black, first, [true, false]), (pairing.black, pairing.red, second, [false, true])]
        {
            entrants[player].points += scored;
            entrants[player].opponents.push(opponent);
            entrants[player].colours.extend(colours);
        }
    }
    if let Some(bye) = round.bye {
        entrants[bye].points += f64::from(games) * points.of(GameResult::Win);
        entrants[bye].had_bye = true;
    }
}

/// Where an event stands as a whole, from its tests' states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventState {
    /// Stopped as a whole, or one of its tests ended without finishing: it makes no more
    /// tests, and those still waiting or playing stop.
    Stopped,
    /// A test waits for approval or plays.
    Playing,
    /// Every test finished: the next round or tie-breaks may follow, or it is over.
    Settled,
}

/// The state of the event `row`, whose tests are in `test_states` (any that ended
/// other than "finished", or is gone, stops the event).
pub fn event_state<'a>(row: &TournamentRow, test_states: impl IntoIterator<Item = &'a str>) -> EventState {
    if row.stopped_ms != 0 {
        return EventState::Stopped;
    }
    let mut playing = false;
    for state in test_states {
        match state {
            "finished" => {}
            "running" | PENDING => playing = true,
            _ => return EventState::Stopped,
        }
    }
    if playing { EventState::Playing } else { EventState::Settled }
}

/// A test an event makes after its first ones, and whether it plays an engine no
/// earlier test of the event played (one that sat out every round so far).
///
/// The event moves on only when every test it made finished, so an admin approved each
/// of them when approval was asked; a follow-up playing the same engines runs the
/// binaries, nets and options already approved and does not wait again. An engine that
/// has only had byes was never in a test an admin saw running: its first test waits
/// as the event's first tests did.
pub struct FollowUp {
    /// The pairing's test.
    pub test: MatchJob,
    /// Whether it plays an engine no earlier test of the event played.
    pub unplayed_engine: bool,
}

/// The tests an event made round by round (Swiss, knockout) needs next, once those it
/// has have all finished: a Swiss event's next round, or a knockout's tie-break pairs or
/// next round. `None` while tests are in play, when the event is stopped, or when it is
/// over.
pub fn next_round_tests(row: &TournamentRow, results: &[PairingResults]) -> Result<Option<Vec<FollowUp>>, String> {
    if event_state(row, results.iter().map(|r| r.job.state.as_str())) != EventState::Settled {
        return Ok(None);
    }
    let request = decode_request(row)?;
    let points = points_of(&request.points).map_err(|e| e.to_string())?;
    let next: Vec<(Pairing, bool)> = match request.system.as_str() {
        "swiss" => {
            let progress = swiss_progress(&request, results, points)?;
            if !progress.settled || progress.rounds.len() >= swiss_rounds(&request) {
                return Ok(None);
            }
            let Some(round) = pair_round(&progress.entrants) else { return Ok(None) };
            round.games.into_iter().map(|pairing| (pairing, false)).collect()
        }
        "knockout" => knockout_progress(&request, results, points)?.next,
        _ => return Ok(None),
    };
    if next.is_empty() {
        return Ok(None);
    }
    let pairs = u64::from(games_per_pairing(&request) / 2);
    let played = |engine: usize| {
        let name = &request.engines[engine].name;
        results.iter().any(|r| &r.job.new_engine == name || &r.job.base_engine == name)
    };
    let tests: Result<Vec<FollowUp>, SpecError> = next
        .into_iter()
        .map(|(pairing, tie_break)| {
            let test = pairing_test(&request, pairing, if tie_break { 1 } else { pairs }, tie_break)?;
            Ok(FollowUp { test, unplayed_engine: !played(pairing.red) || !played(pairing.black) })
        })
        .collect();
    tests.map(Some).map_err(|e| e.to_string())
}

/// A knockout as its tests stand, rebuilt from their results in order: each round's
/// matches, then for the matches still level a tie-break pair each, up to
/// `tie_break_pairs` times, then the next round of the winners.
pub struct KnockoutProgress {
    /// The round in which each engine went out (`None`: still in, or the champion).
    pub out_in_round: Vec<Option<usize>>,
    /// The champion, once the final is decided.
    pub champion: Option<usize>,
    /// The tests to make next (a pairing, and whether it is a tie-break); empty while
    /// tests are in play or when the event is over.
    pub next: Vec<(Pairing, bool)>,
    /// The round of each test taken, in order (a tie-break's is its match's).
    pub test_rounds: Vec<usize>,
}

pub fn knockout_progress(
    request: &v1::CreateTournamentRequest,
    results: &[PairingResults],
    points: Points,
) -> Result<KnockoutProgress, String> {
    let engines = request.engines.len();
    let mut progress = KnockoutProgress {
        out_in_round: vec![None; engines],
        champion: None,
        next: Vec::new(),
        test_rounds: Vec::new(),
    };
    let mut bracket = knockout_bracket(engines);
    let mut taken = 0;
    for round in 1.. {
        let matches: Vec<(usize, usize)> = bracket.iter().filter_map(|&(a, b)| b.map(|b| (a, b))).collect();
        let mut totals = vec![(0.0, 0.0); matches.len()];
        for phase in 0..=request.tie_break_pairs as usize {
            let playing: Vec<usize> =
                (0..matches.len()).filter(|&i| phase == 0 || totals[i].0 == totals[i].1).collect();
            if playing.is_empty() {
                break;
            }
            if taken == results.len() {
                progress.next =
                    playing.iter().map(|&i| (Pairing { red: matches[i].0, black: matches[i].1 }, phase > 0)).collect();
                return Ok(progress);
            }
            let tests =
                results.get(taken..taken + playing.len()).ok_or("a knockout phase has fewer tests than matches")?;
            taken += playing.len();
            for (&i, test) in playing.iter().zip(tests) {
                progress.test_rounds.push(round);
                let (a, b) = (&request.engines[matches[i].0].name, &request.engines[matches[i].1].name);
                if (&test.job.new_engine, &test.job.base_engine) != (a, b) {
                    return Err(format!("job {} does not play the knockout match {a} - {b}", test.job.job_id));
                }
                if matches!(test.job.state.as_str(), "running" | "pending") {
                    return Ok(progress);
                }
                let (first, second) = meeting_points(&test.pairs, points);
                totals[i] = (totals[i].0 + first, totals[i].1 + second);
            }
        }
        let mut winners = Vec::with_capacity(bracket.len());
        for &(a, b) in &bracket {
            let winner = match b {
                None => a,
                Some(b) => {
                    let i = matches.iter().position(|&m| m == (a, b)).expect("a match of the round");
                    let (winner, _) = knockout_winner(a, b, totals[i]);
                    progress.out_in_round[if winner == a { b } else { a }] = Some(round);
                    winner
                }
            };
            winners.push(winner);
        }
        if winners.len() == 1 {
            progress.champion = Some(winners[0]);
            return Ok(progress);
        }
        bracket = next_knockout_round(&winners);
    }
    unreachable!("a knockout ends when one engine is left")
}

fn decode_request(row: &TournamentRow) -> Result<v1::CreateTournamentRequest, String> {
    let bytes = hex::decode(&row.spec).map_err(|e| e.to_string())?;
    v1::CreateTournamentRequest::decode(bytes.as_slice()).map_err(|e| e.to_string())
}

/// Each engine's points in a meeting of game pairs; each pair is the first engine's
/// half points with Red and with Black.
fn meeting_points(pairs: &[[i64; 2]], points: Points) -> (f64, f64) {
    let (mut first, mut second) = (0.0, 0.0);
    for &[as_red, as_black] in pairs {
        let (as_red, as_black) = (half_points(as_red), half_points(as_black));
        first += points.of(as_red) + points.of(as_black);
        second += points.of(as_red.reversed()) + points.of(as_black.reversed());
    }
    (first, second)
}

fn half_points(p: i64) -> GameResult {
    match p {
        2 => GameResult::Win,
        1 => GameResult::Draw,
        _ => GameResult::Loss,
    }
}

/// Why a round was not added to an event.
#[derive(Debug, thiserror::Error)]
pub enum ExtendError {
    /// The event was stopped while the tests were planned.
    #[error("tournament {0} was stopped")]
    Stopped(u64),
    /// The new list of tests could not be stored.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The tournaments, in memory, written through to the database.
pub struct Tournaments {
    rows: Mutex<BTreeMap<u64, TournamentRow>>,
    /// Events seen over (finished, or stopped with their tests), no longer looked at.
    concluded: Mutex<std::collections::HashSet<u64>>,
    /// Serialises changes to the rows, from choosing a number to keeping the row, and a
    /// stop with a round's addition: a round made while the event stops is not added.
    adding: tokio::sync::Mutex<()>,
    /// Serialises creations that carry a request id, from the look for an earlier one
    /// to the new event's entry, so that two retries racing make one event.
    named_creations: tokio::sync::Mutex<()>,
    writer: Writer,
}

/// Stores `changes` in one transaction, then schedules `tests` (which they store).
async fn store_with_tests(
    writer: &Writer,
    scheduler: &Scheduler,
    mut changes: Vec<Change>,
    tests: Vec<NewJob>,
) -> Result<(), WriteError> {
    changes.extend(tests.iter().flat_map(NewJob::changes));
    writer.write(Change::Together(changes)).await?;
    for test in tests {
        scheduler.enter_job(test);
    }
    Ok(())
}

impl Tournaments {
    pub fn new(rows: Vec<TournamentRow>, writer: Writer) -> Self {
        Tournaments {
            rows: Mutex::new(rows.into_iter().map(|r| (r.id as u64, r)).collect()),
            concluded: Mutex::new(std::collections::HashSet::new()),
            adding: tokio::sync::Mutex::new(()),
            named_creations: tokio::sync::Mutex::new(()),
            writer,
        }
    }

    /// Held by a named creation from its look for an earlier event to its end.
    pub async fn named_creation(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.named_creations.lock().await
    }

    /// The events created under the request id `id` (by any token: the caller tells
    /// whose each is).
    pub fn named(&self, id: &str) -> Vec<TournamentRow> {
        let rows = self.rows.lock().expect("tournaments");
        rows.values().filter(|row| !row.request_id.is_empty() && row.request_id == id).cloned().collect()
    }

    /// Stores a tournament of `request` with its first `tests`, all in one transaction
    /// (a crash leaves the event whole or not at all), then schedules the tests;
    /// returns its number. `key` is the client's name for the creation.
    pub async fn add(
        &self,
        request: &v1::CreateTournamentRequest,
        key: Option<&RequestKey>,
        tests: Vec<NewJob>,
        scheduler: &Scheduler,
    ) -> Result<u64, WriteError> {
        let _adding = self.adding.lock().await;
        let id = self.rows.lock().expect("tournaments").keys().next_back().map_or(1, |id| id + 1);
        let row = TournamentRow {
            id: id as i64,
            spec: hex::encode(request.encode_to_vec()),
            job_ids: tests.iter().map(NewJob::id).collect(),
            created_ms: now_ms(),
            stopped_ms: 0,
            request_id: key.map(|k| k.id.clone()).unwrap_or_default(),
            request_digest: key.map(|k| k.digest.clone()).unwrap_or_default(),
        };
        store_with_tests(&self.writer, scheduler, vec![Change::Tournament(row.clone())], tests).await?;
        // Its tests are scheduled first: an event is never seen without them.
        self.rows.lock().expect("tournaments").insert(id, row);
        Ok(id)
    }

    /// The numbers of the newest `limit` tournaments, newest first.
    pub fn newest(&self, limit: usize) -> Vec<u64> {
        self.rows.lock().expect("tournaments").keys().rev().take(limit).copied().collect()
    }

    /// A tournament's row.
    pub fn get(&self, id: u64) -> Option<TournamentRow> {
        self.rows.lock().expect("tournaments").get(&id).cloned()
    }

    /// The numbers of the events not yet seen over.
    pub fn open_ids(&self) -> Vec<u64> {
        let concluded = self.concluded.lock().expect("concluded").clone();
        let rows = self.rows.lock().expect("tournaments");
        rows.keys().filter(|id| !concluded.contains(id)).copied().collect()
    }

    /// Marks event `id` over: no tests will follow, and none of its tests plays.
    pub fn conclude(&self, id: u64) {
        self.concluded.lock().expect("concluded").insert(id);
    }

    /// Stops event `id` as a whole: it adds no more tests. Returns its row with every
    /// test it has, those to stop among them; `None`: no such event.
    pub async fn stop(&self, id: u64) -> Result<Option<TournamentRow>, WriteError> {
        let _adding = self.adding.lock().await;
        let Some(mut row) = self.get(id) else { return Ok(None) };
        if row.stopped_ms == 0 {
            row.stopped_ms = now_ms();
            self.writer.write(Change::TournamentStopped { id: row.id, at_ms: row.stopped_ms }).await?;
            self.rows.lock().expect("tournaments").insert(id, row.clone());
        }
        Ok(Some(row))
    }

    /// Stores the `tests` of tournament `id`'s next round (or a knockout's tie-breaks)
    /// with its new list of tests, in one transaction (a crash leaves the round whole
    /// or not at all), then schedules them; unless it was stopped since they were
    /// planned, when none is made.
    pub async fn extend(&self, id: u64, tests: Vec<NewJob>, scheduler: &Scheduler) -> Result<(), ExtendError> {
        let _adding = self.adding.lock().await;
        let Some(mut row) = self.get(id) else { return Ok(()) };
        if row.stopped_ms != 0 {
            return Err(ExtendError::Stopped(id));
        }
        row.job_ids.extend(tests.iter().map(NewJob::id));
        let listed = Change::TournamentJobs { id: row.id, job_ids: row.job_ids.clone() };
        store_with_tests(&self.writer, scheduler, vec![listed], tests).await?;
        self.rows.lock().expect("tournaments").insert(id, row);
        Ok(())
    }
}

/// A pairing's test as the view needs it: its job, and its counted pairs as the first
/// engine's half points in the game where it had Red and in the one where it had Black.
pub struct PairingResults {
    pub job: v1::Job,
    /// Shared with the kept pair points: an event's view copies none of them.
    pub pairs: Arc<Vec<[i64; 2]>>,
}

/// The tournament's view from its pairings' results (in pairing order).
pub fn view(row: &TournamentRow, results: &[PairingResults]) -> Result<v1::Tournament, String> {
    let request = decode_request(row)?;
    let points = points_of(&request.points).map_err(|e| e.to_string())?;
    let names: Vec<String> = request.engines.iter().map(|e| e.name.clone()).collect();
    let index = |name: &str| names.iter().position(|n| n == name);
    // Whether a Swiss event or knockout whose tests all finished has more to make.
    let mut more_to_come = false;
    let mut byes = Vec::new();
    let mut system = System::RoundRobin;
    let mut knockout = None;
    // The round each test belongs to: a round robin's Berger round, a gauntlet's
    // encounter, a Swiss or knockout round (a knockout's tie-breaks in their match's).
    let rounds: Vec<usize> = match request.system.as_str() {
        "swiss" => {
            let progress = swiss_progress(&request, results, points)?;
            for bye in progress.rounds.iter().filter_map(|r| r.bye) {
                byes.extend(std::iter::repeat_n(bye, games_per_pairing(&request) as usize));
            }
            more_to_come = progress.settled
                && progress.rounds.len() < swiss_rounds(&request)
                && pair_round(&progress.entrants).is_some();
            system = System::Swiss;
            let rounds = progress.rounds.iter().enumerate();
            rounds.flat_map(|(r, round)| std::iter::repeat_n(r + 1, round.games.len())).collect()
        }
        "knockout" => {
            let progress = knockout_progress(&request, results, points)?;
            more_to_come = progress.champion.is_none();
            let rounds = progress.test_rounds.clone();
            knockout = Some(progress);
            rounds
        }
        "gauntlet" => (1..=results.len()).collect(),
        _ => round_robin(names.len(), false)
            .iter()
            .enumerate()
            .flat_map(|(r, round)| std::iter::repeat_n(r + 1, round.games.len()))
            .collect(),
    };
    let mut games = Vec::new();
    let mut pairings = Vec::with_capacity(results.len());
    for (i, result) in results.iter().enumerate() {
        let (Some(first), Some(second)) = (index(&result.job.new_engine), index(&result.job.base_engine)) else {
            return Err(format!("job {} plays engines outside the tournament", result.job.job_id));
        };
        for &[as_red, as_black] in result.pairs.iter() {
            games.push(Game { red: first, black: second, result: half_points(as_red) });
            games.push(Game { red: second, black: first, result: half_points(as_black).reversed() });
        }
        let (first_points, second_points) = meeting_points(&result.pairs, points);
        pairings.push(v1::TournamentPairing {
            first: names[first].clone(),
            second: names[second].clone(),
            job_id: result.job.job_id,
            pairs_done: result.job.units_done,
            pairs_total: result.job.units_total,
            first_points,
            second_points,
            round: rounds.get(i).map_or(0, |&r| r as u32),
        });
    }
    let lines = standings_with_byes(names.len(), &games, &byes, system, points);
    let rated: Vec<RatedGame> = games
        .iter()
        .map(|g| RatedGame { first: g.red, second: g.black, score: points.of(g.result) / points.of(GameResult::Win) })
        .collect();
    let (ratings, rating_prior_draws) =
        event_ratings(names.len(), &rated).map_or((None, 0.0), |(r, prior)| (Some(r), prior));
    let mut standings: Vec<v1::TournamentStanding> = lines
        .iter()
        .map(|line| v1::TournamentStanding {
            engine: names[line.player].clone(),
            place: knockout.as_ref().map_or(line.place, |k| knockout_place(k, line.player)) as u32,
            points: line.points,
            games: line.games as u32,
            wins: line.wins as u32,
            draws: line.draws as u32,
            losses: line.losses as u32,
            elo: ratings.as_ref().map_or(0.0, |r| r.elo[line.player]),
            elo_error: ratings.as_ref().map_or(0.0, |r| r.error[line.player]),
            tie_breaks: line
                .tie_breaks
                .iter()
                .map(|(tie_break, value)| (tie_break.article(system).to_owned(), *value))
                .collect(),
        })
        .collect();
    // A knockout places by how far each engine went; points order those who went out
    // together (the sort is stable).
    standings.sort_by_key(|s| s.place);
    Ok(v1::Tournament {
        tournament_id: row.id as u64,
        system: if request.system.is_empty() { "double-round-robin".to_owned() } else { request.system.clone() },
        description: request.settings.map(|s| s.description).unwrap_or_default(),
        state: match event_state(row, results.iter().map(|r| r.job.state.as_str())) {
            EventState::Stopped => "stopped",
            EventState::Playing => "running",
            EventState::Settled if more_to_come => "running",
            EventState::Settled => "finished",
        }
        .to_owned(),
        pairings,
        standings,
        created_ms: row.created_ms,
        points: if request.points.is_empty() { "2-1-0".to_owned() } else { request.points },
        rating_prior_draws,
        problem: String::new(),
    })
}

/// Numbers a tournament's games for its PGN: each match's games 1, 2, ... in the order
/// stored, a knockout's tie-break games going on from their match's.
#[derive(Default)]
pub struct GameNumbering {
    played: HashMap<(u32, String, String), u32>,
}

impl GameNumbering {
    /// `pgn`, stored games of `pairing`, each game's header opening with `[Event]` set
    /// to `event` and `[Round]` to "round.game" (PGN's dotted round) in place of its own.
    /// A game starts at the first tag line after move text, as the PGN reader splits them.
    pub fn tag(&mut self, pgn: &str, event: &str, pairing: &v1::TournamentPairing) -> String {
        let numbered = self.played.entry((pairing.round, pairing.first.clone(), pairing.second.clone())).or_default();
        let event: String = event.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let event = event.replace('\\', "\\\\").replace('"', "\\\"");
        let mut text = String::with_capacity(pgn.len() + 64);
        let mut in_header = false;
        for line in pgn.lines() {
            let tag = line.starts_with('[');
            if tag && !in_header {
                *numbered += 1;
                text.push_str(&format!("[Event \"{event}\"]\n[Round \"{}.{numbered}\"]\n", pairing.round));
            }
            in_header = tag;
            if !(line.starts_with("[Event ") || line.starts_with("[Round ")) {
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    }
}

/// A knockout's place of `engine`: 1 for the champion (or one still in), else one more
/// than the engines that went further than the round it went out in.
fn knockout_place(progress: &KnockoutProgress, engine: usize) -> usize {
    match progress.out_in_round[engine] {
        None => 1,
        Some(round) => 1 + progress.out_in_round.iter().filter(|out| out.is_none_or(|r| r > round)).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAIR: &str = "[Event \"test 7\"]\n[Round \"3\"]\n[White \"a\"]\n[Black \"b\"]\n\n1. h2e2 {book} 1-0\n\n\
                        [Event \"test 7\"]\n[Round \"4\"]\n[White \"b\"]\n[Black \"a\"]\n\n1. h2e2 {book} 0-1\n\n";

    #[test]
    fn event_games_carry_the_event_and_number_on_within_a_match() {
        let pairing = v1::TournamentPairing { first: "a".into(), second: "b".into(), round: 2, ..Default::default() };
        let mut numbering = GameNumbering::default();
        let first = numbering.tag(PAIR, "Cup \"A\"\n2026", &pairing);
        let tie_break = numbering.tag(PAIR, "Cup", &pairing);
        let games = xq_engine::xiangqi::pgn::parse_pgn(&(first.clone() + &tie_break)).unwrap();
        let tags: Vec<(&str, &str)> =
            games.iter().map(|g| (g.tag("Event").unwrap(), g.tag("Round").unwrap())).collect();
        assert_eq!(tags, [("Cup \"A\" 2026", "2.1"), ("Cup \"A\" 2026", "2.2"), ("Cup", "2.3"), ("Cup", "2.4")]);
        assert!(first.contains("[Event \"Cup \\\"A\\\" 2026\"]"), "{first}");
        // Everything else is as stored.
        let stored = PAIR.replace("[Round \"3\"]\n", "").replace("[Round \"4\"]\n", "");
        let without_round = first.replace("[Round \"2.1\"]\n", "").replace("[Round \"2.2\"]\n", "");
        assert_eq!(without_round.replace("Cup \\\"A\\\" 2026", "test 7"), stored);
        // Another match's games are numbered from 1.
        let other = v1::TournamentPairing { first: "c".into(), second: "d".into(), round: 2, ..Default::default() };
        assert!(numbering.tag(PAIR, "Cup", &other).contains("[Round \"2.1\"]"));
    }
}
