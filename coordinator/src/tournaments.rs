//! Tournaments across the fleet: each pairing of a double round robin or a gauntlet is
//! a match test of its own (game pairs, colours swapped on each opening), leased,
//! played, checked and counted as any test is, so that nothing about workers or
//! reports changes; the tournament keeps its tests' ids and places its engines from
//! their counted pairs by Articles 9 and 10 of the World Xiangqi Rules
//! ([`xq_tournament`]), with ratings over all its games ([`xq_stats::ratings`]).
//! Standings are never stored: they are computed from the tests' results when asked.

use std::collections::BTreeMap;
use std::sync::Mutex;

use prost::Message;
use xq_proto::v1;
use xq_stats::ratings::{RatedGame, event_ratings};
use xq_tournament::pairing::{Pairing, gauntlet, round_robin};
use xq_tournament::scoring::{GameResult, Points};
use xq_tournament::standings::{Game, System, standings};

use crate::jobs::{MatchJob, SpecError, check_test};
use crate::storage::{Change, TournamentRow, now_ms};
use crate::writer::{WriteError, Writer};

fn bad(field: &'static str, problem: impl Into<String>) -> SpecError {
    SpecError { field, problem: problem.into() }
}

/// The most engines in a tournament.
pub const MAX_ENGINES: usize = 64;

/// A checked tournament: its pairings' tests, in pairing order, and their pairs each.
pub struct Plan {
    pub pairings: Vec<(usize, usize, MatchJob)>,
    pub pairs_per_pairing: u64,
    pub points: Points,
}

fn points_of(text: &str) -> Result<Points, SpecError> {
    match text {
        "" | "2-1-0" => Ok(Points::TwoOneZero),
        "1-0.5-0" => Ok(Points::OneHalfZero),
        other => Err(bad("points", format!("'{other}': 2-1-0 or 1-0.5-0"))),
    }
}

/// Checks a tournament request and plans its pairings' tests.
pub fn plan(request: &v1::CreateTournamentRequest) -> Result<Plan, SpecError> {
    let engines = &request.engines;
    if !(2..=MAX_ENGINES).contains(&engines.len()) {
        return Err(bad("engines", format!("between 2 and {MAX_ENGINES}")));
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
    let games = if request.games_per_pairing == 0 { 2 } else { request.games_per_pairing };
    if !games.is_multiple_of(2) || games > 10_000 {
        return Err(bad("games_per_pairing", "an even number, at most 10,000: game pairs with colours swapped"));
    }
    let pairings: Vec<Pairing> = match request.system.as_str() {
        "" | "double-round-robin" => round_robin(engines.len(), false).into_iter().flat_map(|r| r.games).collect(),
        "gauntlet" => {
            let challengers = request.challengers as usize;
            if challengers == 0 || challengers >= engines.len() {
                return Err(bad("challengers", format!("1 to {}: the rest is the field", engines.len() - 1)));
            }
            gauntlet(challengers, engines.len() - challengers, 1)
        }
        other => return Err(bad("system", format!("'{other}': double-round-robin or gauntlet"))),
    };
    let points = points_of(&request.points)?;
    let pairs = u64::from(games / 2);
    let mut planned = Vec::with_capacity(pairings.len());
    for pairing in pairings {
        let test = v1::CreateTestRequest {
            new_engine: Some(engines[pairing.red].clone()),
            base_engine: Some(engines[pairing.black].clone()),
            pairs,
            description: format!(
                "{}: {} vs {}",
                if settings.description.is_empty() { "tournament" } else { &settings.description },
                engines[pairing.red].name,
                engines[pairing.black].name
            ),
            ..settings.clone()
        };
        planned.push((pairing.red, pairing.black, check_test(&test)?));
    }
    Ok(Plan { pairings: planned, pairs_per_pairing: pairs, points })
}

/// The tournaments, in memory, written through to the database.
pub struct Tournaments {
    rows: Mutex<BTreeMap<u64, TournamentRow>>,
    /// Serialises additions from choosing a number to keeping the row.
    adding: tokio::sync::Mutex<()>,
    writer: Writer,
}

impl Tournaments {
    pub fn new(rows: Vec<TournamentRow>, writer: Writer) -> Self {
        Tournaments {
            rows: Mutex::new(rows.into_iter().map(|r| (r.id as u64, r)).collect()),
            adding: tokio::sync::Mutex::new(()),
            writer,
        }
    }

    /// Stores a tournament of `request` made of the tests `job_ids`; returns its number.
    pub async fn add(&self, request: &v1::CreateTournamentRequest, job_ids: Vec<u64>) -> Result<u64, WriteError> {
        let _adding = self.adding.lock().await;
        let id = self.rows.lock().expect("tournaments").keys().next_back().map_or(1, |id| id + 1);
        let row =
            TournamentRow { id: id as i64, spec: hex::encode(request.encode_to_vec()), job_ids, created_ms: now_ms() };
        self.writer.write(Change::Tournament(row.clone())).await?;
        self.rows.lock().expect("tournaments").insert(id, row);
        Ok(id)
    }

    /// A tournament's row.
    pub fn get(&self, id: u64) -> Option<TournamentRow> {
        self.rows.lock().expect("tournaments").get(&id).cloned()
    }
}

/// A pairing's test as the view needs it: its job, and its counted pairs as the first
/// engine's half points in the game where it had Red and in the one where it had Black.
pub struct PairingResults {
    pub job: v1::Job,
    pub pairs: Vec<[i64; 2]>,
}

/// The tournament's view from its pairings' results (in pairing order).
pub fn view(row: &TournamentRow, results: &[PairingResults]) -> Result<v1::Tournament, String> {
    let bytes = hex::decode(&row.spec).map_err(|e| e.to_string())?;
    let request = v1::CreateTournamentRequest::decode(bytes.as_slice()).map_err(|e| e.to_string())?;
    let points = points_of(&request.points).map_err(|e| e.to_string())?;
    let names: Vec<String> = request.engines.iter().map(|e| e.name.clone()).collect();
    let index = |name: &str| names.iter().position(|n| n == name);
    let mut games = Vec::new();
    let mut pairings = Vec::with_capacity(results.len());
    for result in results {
        let (Some(first), Some(second)) = (index(&result.job.new_engine), index(&result.job.base_engine)) else {
            return Err(format!("job {} plays engines outside the tournament", result.job.job_id));
        };
        let half_points = |p: i64| match p {
            2 => GameResult::Win,
            1 => GameResult::Draw,
            _ => GameResult::Loss,
        };
        let (mut first_points, mut second_points) = (0.0, 0.0);
        for pair in &result.pairs {
            let (as_red, as_black) = (half_points(pair[0]), half_points(pair[1]));
            games.push(Game { red: first, black: second, result: as_red });
            games.push(Game { red: second, black: first, result: as_black.reversed() });
            first_points += points.of(as_red) + points.of(as_black);
            second_points += points.of(as_red.reversed()) + points.of(as_black.reversed());
        }
        pairings.push(v1::TournamentPairing {
            first: names[first].clone(),
            second: names[second].clone(),
            job_id: result.job.job_id,
            pairs_done: result.job.units_done,
            pairs_total: result.job.units_total,
            first_points,
            second_points,
        });
    }
    let lines = standings(names.len(), &games, System::RoundRobin, points);
    let rated: Vec<RatedGame> = games
        .iter()
        .map(|g| RatedGame { first: g.red, second: g.black, score: points.of(g.result) / points.of(GameResult::Win) })
        .collect();
    let (ratings, rating_prior_draws) =
        event_ratings(names.len(), &rated).map_or((None, 0.0), |(r, prior)| (Some(r), prior));
    let standings = lines
        .iter()
        .map(|line| v1::TournamentStanding {
            engine: names[line.player].clone(),
            place: line.place as u32,
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
                .map(|(tie_break, value)| (tie_break.article(System::RoundRobin).to_owned(), *value))
                .collect(),
        })
        .collect();
    let running = results.iter().any(|r| r.job.state == "running");
    Ok(v1::Tournament {
        tournament_id: row.id as u64,
        system: if request.system.is_empty() { "double-round-robin".to_owned() } else { request.system.clone() },
        description: request.settings.map(|s| s.description).unwrap_or_default(),
        state: if running { "running" } else { "finished" }.to_owned(),
        pairings,
        standings,
        created_ms: row.created_ms,
        points: if request.points.is_empty() { "2-1-0".to_owned() } else { request.points },
        rating_prior_draws,
    })
}
