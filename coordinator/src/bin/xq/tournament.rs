//! `xq tournament`, `xq tournaments`, `xq crosstable` and `xq tournament-stop`: events
//! of several engines, a test a pairing.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use xq_proto::client::{self, Client};
use xq_proto::v1;

use crate::play::{PlayArgs, talk_setting};

#[derive(Args)]
pub struct TournamentArgs {
    /// An engine: PATH, or NAME=PATH (repeatable, in the order of their numbers; a
    /// gauntlet's challengers first). Each is uploaded once.
    #[arg(long = "engine", required = true)]
    engines: Vec<String>,
    /// An option of one engine: NAME:OPTION=VALUE (repeatable).
    #[arg(long = "engine-option")]
    engine_options: Vec<String>,
    /// The engines' protocol: uci or ucci.
    #[arg(long, default_value = "uci")]
    protocol: String,
    /// How to talk to one engine, NAME:KEY=VALUE (repeatable): protocol=uci|ucci,
    /// ranks=0-9|1-10 (how it numbers ranks in moves: 1-10 for Fairy-Stockfish and
    /// Sjaak II over UCI), fen=nb|he (its FEN letters for horse and elephant: he for
    /// Sjaak II).
    #[arg(long = "engine-setting")]
    engine_settings: Vec<String>,
    /// A net for one engine, NAME=FILE in its own format (repeatable): uploaded, and
    /// its path passed to the engine through --net-option on every worker.
    #[arg(long = "engine-net")]
    engine_nets: Vec<String>,
    /// The option the engines take their net's path by.
    #[arg(long, default_value = xq_proto::DEFAULT_NET_OPTION)]
    net_option: String,
    /// double-round-robin, gauntlet, swiss or knockout (seeded by the engines' order,
    /// matches of --games-per-pairing games).
    #[arg(long, default_value = "double-round-robin")]
    system: String,
    /// A Swiss event's rounds (0: log2 of the engines, rounded up, plus 2).
    #[arg(long, default_value_t = 0)]
    rounds: u32,
    /// A knockout's tie-break pairs' time control (default: --tc).
    #[arg(long, default_value = "")]
    tie_break_tc: String,
    /// Pairs of tie-break games a level knockout match plays before the higher seed
    /// goes on.
    #[arg(long, default_value_t = 2)]
    tie_break_pairs: u32,
    /// A gauntlet's challengers: the first engines given.
    #[arg(long, default_value_t = 1)]
    challengers: u32,
    /// Games each pairing plays (even: pairs with colours swapped).
    #[arg(long, default_value_t = 2)]
    games_per_pairing: u32,
    /// Points a game: 2-1-0 or 1-0.5-0 (Article 9.1).
    #[arg(long, default_value = "2-1-0")]
    points: String,
    /// A label.
    #[arg(long, default_value = "")]
    description: String,
    #[command(flatten)]
    play: PlayArgs,
}

/// `xq tournament`: uploads each engine once and submits the event.
pub async fn submit(client: &mut Client, args: TournamentArgs) -> anyhow::Result<()> {
    let mut engines: Vec<v1::EngineSpec> = Vec::new();
    for text in &args.engines {
        let (name, path) = match text.split_once('=') {
            Some((name, path)) => (name.to_owned(), PathBuf::from(path)),
            None => {
                let path = PathBuf::from(text);
                let name = path.file_name().map_or("engine".to_owned(), |n| n.to_string_lossy().into_owned());
                (name, path)
            }
        };
        let binary = client::upload_file(client, &path, "engine").await?;
        engines.push(v1::EngineSpec {
            name,
            binary: Some(binary),
            protocol: args.protocol.clone(),
            ..Default::default()
        });
    }
    for option in &args.engine_options {
        let (target, key, value) = engine_assignment(&mut engines, "--engine-option", option)?;
        target.options.insert(key.to_owned(), value.to_owned());
    }
    for setting in &args.engine_settings {
        let (target, key, value) = engine_assignment(&mut engines, "--engine-setting", setting)?;
        talk_setting(target, key, value).with_context(|| format!("--engine-setting '{setting}'"))?;
    }
    for text in &args.engine_nets {
        let (name, path) = text.split_once('=').with_context(|| format!("--engine-net '{text}' is not NAME=FILE"))?;
        let target = engines
            .iter_mut()
            .find(|e| e.name == name)
            .with_context(|| format!("--engine-net '{text}': no engine is named '{name}'"))?;
        target.net = Some(client::upload_file(client, std::path::Path::new(path), "net").await?);
        target.net_option = args.net_option.clone();
    }
    let mut settings = args.play.test_request(client, None, None).await?;
    settings.description = args.description.clone();
    let request = v1::CreateTournamentRequest {
        engines,
        system: args.system.clone(),
        challengers: args.challengers,
        games_per_pairing: args.games_per_pairing,
        settings: Some(settings),
        points: args.points.clone(),
        rounds: args.rounds,
        tie_break_time_control: args.tie_break_tc.clone(),
        tie_break_pairs: args.tie_break_pairs,
    };
    let id = client::new_request_id();
    let tournament = client::create_named(client, &request, &id, |mut client, request| async move {
        client.create_tournament(request).await
    })
    .await?;
    out!(
        "tournament {}: {} pairings ({}), tests {}",
        tournament.tournament_id,
        tournament.pairings.len(),
        tournament.system,
        tournament.pairings.iter().map(|p| p.job_id.to_string()).collect::<Vec<_>>().join(", ")
    );
    Ok(())
}

/// `xq tournaments`: the newest events, a line each.
pub async fn list(client: &mut Client, limit: u32) -> anyhow::Result<()> {
    let reply = client.list_tournaments(v1::ListTournamentsRequest { limit }).await?.into_inner();
    for t in reply.tournaments {
        out!("{}", tournament_line(&t));
    }
    Ok(())
}

/// `xq tournament-stop`: no more rounds, and its tests stop.
pub async fn stop(client: &mut Client, tournament: u64) -> anyhow::Result<()> {
    let t = client.stop_tournament(v1::TournamentId { tournament_id: tournament }).await?.into_inner();
    out!("{}", tournament_line(&t));
    Ok(())
}

/// `xq crosstable`: the standings with their tie-breaks, and the pairings.
pub async fn crosstable(client: &mut Client, tournament: u64) -> anyhow::Result<()> {
    let t = client.get_tournament(v1::TournamentId { tournament_id: tournament }).await?.into_inner();
    out!("tournament {} [{}] {} ({} points a game)", t.tournament_id, t.state, t.system, t.points);
    out!("{:>3} {:<20} {:>6} {:>5} {:>9} {:>14} {:>8}", "#", "engine", "points", "games", "W-D-L", "Elo", "10.2.A");
    for s in &t.standings {
        let elo = if s.elo_error > 0.0 { format!("{:+.0} ± {:.0}", s.elo, s.elo_error) } else { "-".to_owned() };
        out!(
            "{:>3} {:<20} {:>6} {:>5} {:>9} {:>14} {:>8}",
            s.place,
            s.engine,
            s.points,
            s.games,
            format!("{}-{}-{}", s.wins, s.draws, s.losses),
            elo,
            s.tie_breaks.get("10.2.A").copied().unwrap_or(0.0)
        );
    }
    if t.rating_prior_draws > 0.0 {
        out!(
            "Elo with {} virtual draw(s) between every pair that met: an engine won or lost every game",
            t.rating_prior_draws
        );
    }
    for p in &t.pairings {
        out!(
            "  {} - {}: {}-{} after {}/{} pairs (test {})",
            p.first,
            p.second,
            p.first_points,
            p.second_points,
            p.pairs_done,
            p.pairs_total,
            p.job_id
        );
    }
    Ok(())
}

/// The engine named by `NAME:KEY=VALUE` (the text of `flag`), the key and the value.
fn engine_assignment<'a, 'e>(
    engines: &'e mut [v1::EngineSpec],
    flag: &str,
    text: &'a str,
) -> anyhow::Result<(&'e mut v1::EngineSpec, &'a str, &'a str)> {
    let (engine, assignment) =
        text.split_once(':').with_context(|| format!("{flag} '{text}' is not NAME:KEY=VALUE"))?;
    let (key, value) = assignment.split_once('=').with_context(|| format!("{flag} '{text}' has no =VALUE"))?;
    let target = engines
        .iter_mut()
        .find(|e| e.name == engine)
        .with_context(|| format!("{flag} '{text}': no engine is named '{engine}'"))?;
    Ok((target, key, value))
}

/// A tournament in one line: number, state, system, size and leader.
fn tournament_line(t: &v1::Tournament) -> String {
    let leader = t.standings.first().map_or("-".to_owned(), |s| format!("{} ({} points)", s.engine, s.points));
    format!(
        "tournament {} [{}] {}: {} engines, {} pairings, leader {}{}",
        t.tournament_id,
        t.state,
        t.system,
        t.standings.len(),
        t.pairings.len(),
        leader,
        if t.description.is_empty() { String::new() } else { format!(", {}", t.description) }
    )
}
