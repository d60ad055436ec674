//! One game between two engines, refereed by the arbiter: the engines' clocks, their
//! moves checked and played, the rules' verdicts, adjudication, and failures sorted
//! into results with reasons.

use std::time::Duration;

use xq_engine::color::{ByColor, Color};
use xq_engine::variant::Variant;
use xq_engine::xiangqi::movegen::legal_moves;
use xq_engine::xiangqi::notation::{Dialect, MoveTextError, format_uci, parse_uci};
use xq_engine::xiangqi::rules::{Outcome, Referee, RefereeConfig, RuleSet, Ruling, ViolationTiming};
use xq_engine::xiangqi::{Move, Position};
use xq_engine::xiongqi;

use crate::engine_process::{EngineConfig, EngineError, EngineProcess, Protocol};
use crate::time_control::{Clock, TimeControl};

pub use xq_engine::adjudication::Adjudication;
use xq_engine::adjudication::{Adjudicator, Verdict};

/// How games are played.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GameSettings {
    /// The time control, of an engine whose config names none of its own.
    pub time_control: TimeControl,
    /// The rule set the referee applies.
    pub rules: RuleSet,
    /// Extra time an engine may use beyond its clock before it loses on time.
    pub time_margin: Duration,
    /// How long a node- or depth-limited search may take before the engine is
    /// considered hung.
    pub hang_timeout: Duration,
    /// Score-based adjudication.
    pub adjudication: Adjudication,
    /// Draw after this many plies, if set.
    pub max_plies: Option<usize>,
    /// When a lone perpetual check or chase loses. With
    /// [`ViolationTiming::AfterWarning`] the violator is warned at the threefold
    /// repetition as the books have it: its repeating moves are banned for its engine
    /// (UCCI `banmoves`, UCI `go searchmoves` with the other legal moves), and it loses
    /// only if it repeats the cycle anyway.
    pub violation_timing: ViolationTiming,
}

pub use xq_engine::xiangqi::book::Opening;

/// Where a game starts: a Xiangqi opening (a position and book moves), or a Xiongqi
/// position. The engines must have been told the variant (`UCI_Variant`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// A Xiangqi game (boxed: a Xiangqi position is several times a Xiongqi one).
    Xiangqi(Box<Opening>),
    /// A Xiongqi game.
    Xiongqi(xiongqi::Position),
}

impl From<Opening> for Start {
    fn from(opening: Opening) -> Self {
        Start::Xiangqi(Box::new(opening))
    }
}

impl Start {
    /// The game played.
    pub fn variant(&self) -> Variant {
        match self {
            Start::Xiangqi(_) => Variant::Xiangqi,
            Start::Xiongqi(_) => Variant::Xiongqi,
        }
    }
}

/// How a game ended, beyond its result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Termination {
    /// By the rules: mate, stalemate, repetition, move count.
    Rules,
    /// A clock ran out.
    TimeForfeit,
    /// An engine played an illegal or unreadable move.
    IllegalMove,
    /// An engine crashed, hung or misbehaved.
    EngineFailure,
    /// By score adjudication or the length limit.
    Adjudication,
}

impl Termination {
    /// The PGN `Termination` tag's value.
    pub fn pgn(self) -> &'static str {
        match self {
            Termination::Rules => "normal",
            Termination::TimeForfeit => "time forfeit",
            Termination::IllegalMove => "rules infraction",
            Termination::EngineFailure => "abandoned",
            Termination::Adjudication => "adjudication",
        }
    }

    /// The termination a PGN `Termination` tag names.
    pub fn from_pgn(tag: &str) -> Option<Termination> {
        [
            Termination::Rules,
            Termination::TimeForfeit,
            Termination::IllegalMove,
            Termination::EngineFailure,
            Termination::Adjudication,
        ]
        .into_iter()
        .find(|termination| termination.pgn() == tag)
    }
}

/// A move as played, with what the engine said of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayedMove {
    /// The move in the product's coordinates (UCI, Xiangqi ranks 0..9).
    pub mv: String,
    /// The engine's last score, from the mover's view; `None` for book moves.
    pub score: Option<i32>,
    /// The engine's last depth.
    pub depth: Option<u32>,
    /// Thinking time; zero for book moves.
    pub elapsed: Duration,
}

/// A finished game.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GameRecord {
    /// Names of the engines playing Red (South) and Black (North).
    pub players: ByColor<String>,
    /// The game played.
    pub variant: Variant,
    /// The start position's FEN.
    pub start_fen: String,
    /// Whether it is the variant's standard start position.
    pub from_startpos: bool,
    /// Every move, book moves first.
    pub moves: Vec<PlayedMove>,
    /// How many of them were book moves.
    pub book_plies: usize,
    /// The result.
    pub outcome: Outcome,
    /// Why, in words.
    pub reason: String,
    /// The kind of ending.
    pub termination: Termination,
    /// The engine that failed, if one did, with its error.
    pub failure: Option<(Color, EngineError)>,
    /// After a time forfeit: how long the loser thought on the move it never made.
    pub overtime: Option<Duration>,
    /// After an illegal move: the move as the engine sent it.
    pub illegal_move: Option<String>,
    /// The colour of the engine that failed (crashed, hung without a clock, answered
    /// nonsense) or moved illegally before its first move of the game: an engine that
    /// cannot play a move at all fails the pair rather than losing it.
    pub failed_before_moving: Option<Color>,
    /// When a lone perpetual lost ([`GameSettings::violation_timing`]).
    pub violation_timing: ViolationTiming,
    /// The time control each side played under (different with time odds).
    pub time_controls: ByColor<TimeControl>,
    /// The arbiter's warnings: before ply N (1-based), the moves banned for its
    /// mover, as `N:move,move` (product coordinates).
    pub warnings: Vec<String>,
}

/// The side to move in `fen` (Xiangqi's or Xiongqi's): the colour of a game's first
/// ply. Red unless the second field says `b`.
pub fn first_mover(fen: &str) -> Color {
    if fen.split_whitespace().nth(1) == Some("b") { Color::Black } else { Color::Red }
}

fn limits_text(protocol: Protocol, time_control: &TimeControl, clocks: &ByColor<Option<Clock>>, side: Color) -> String {
    let ms = |d: Duration| d.as_millis();
    match (time_control, &clocks[side]) {
        (TimeControl::Clock(_), Some(own)) => {
            // Sides with time odds are limited alike (checked at submission); the
            // other side's clock stands in for itself if it had none.
            let (red, black) = (clocks.red.as_ref().unwrap_or(own), clocks.black.as_ref().unwrap_or(own));
            let moves_to_go = own.moves_to_go().map(|m| format!(" movestogo {m}")).unwrap_or_default();
            match protocol {
                Protocol::Uci => format!(
                    "wtime {} btime {} winc {} binc {}{moves_to_go}",
                    ms(red.remaining()),
                    ms(black.remaining()),
                    ms(red.increment()),
                    ms(black.increment())
                ),
                Protocol::Ucci => {
                    format!("time {} increment {}{moves_to_go}", ms(own.remaining()), ms(own.increment()))
                }
            }
        }
        (TimeControl::MoveTime(t), _) => match protocol {
            Protocol::Uci => format!("movetime {}", ms(*t)),
            Protocol::Ucci => format!("time {} movestogo 1", ms(*t)),
        },
        (TimeControl::Nodes(n), _) => format!("nodes {n}"),
        (TimeControl::Depth(d), _) => format!("depth {d}"),
        (TimeControl::Clock(_), None) => unreachable!("a side under a clock has one"),
    }
}

/// `position startpos` for the start position, which every engine reads; otherwise
/// the FEN (Xiangqi's in the engine's flavour); then the moves in its dialect.
fn position_text(record: &GameRecord, arbiter: &Arbiter, engine: &EngineProcess) -> String {
    let config = engine.config();
    let mut text = if record.from_startpos {
        "position startpos".to_owned()
    } else {
        match arbiter {
            Arbiter::Xiangqi { .. } => format!("position fen {}", config.fen_flavour.write(&record.start_fen)),
            Arbiter::Xiongqi { .. } => format!("position fen {}", record.start_fen),
        }
    };
    if !record.moves.is_empty() {
        text.push_str(" moves");
        for played in &record.moves {
            text.push(' ');
            text.push_str(&arbiter.engine_text(&played.mv, config.dialect));
        }
    }
    text
}

/// Bans the moves the arbiter's warning forbids the side to move (Xiangqi only): a
/// UCCI `banmoves` line after the position, or for UCI the other legal moves as `go
/// searchmoves`, which Stockfish's kin read to the end of the line. Returns the moves
/// banned, comma-separated in product coordinates, if any.
fn ban_warned_moves(
    arbiter: &Arbiter,
    engine: &EngineConfig,
    position: &mut String,
    limits: &mut String,
) -> Option<String> {
    let Arbiter::Xiangqi { referee } = arbiter else { return None };
    let warned = referee.warned_moves();
    if warned.is_empty() {
        return None;
    }
    let text = |mv: Move| arbiter.engine_text(&format_uci(mv, Dialect::ZeroBased), engine.dialect);
    match engine.protocol {
        Protocol::Ucci => {
            position.push_str("\nbanmoves");
            for &mv in &warned {
                position.push(' ');
                position.push_str(&text(mv));
            }
        }
        Protocol::Uci => {
            limits.push_str(" searchmoves");
            for &mv in legal_moves(referee.position()).iter().filter(|mv| !warned.contains(mv)) {
                limits.push(' ');
                limits.push_str(&text(mv));
            }
        }
    }
    Some(warned.iter().map(|&mv| format_uci(mv, Dialect::ZeroBased)).collect::<Vec<_>>().join(","))
}

/// The rules of the game played: the Xiangqi referee, or a Xiongqi game.
enum Arbiter {
    Xiangqi { referee: Box<Referee> },
    Xiongqi { game: Box<xiongqi::Refereed> },
}

impl Arbiter {
    fn side_to_move(&self) -> Color {
        match self {
            Arbiter::Xiangqi { referee } => referee.position().side_to_move(),
            Arbiter::Xiongqi { game } => game.position().side_to_move(),
        }
    }

    fn ruling(&mut self) -> Option<Ruling> {
        match self {
            Arbiter::Xiangqi { referee } => referee.ruling(),
            Arbiter::Xiongqi { game } => game.ruling(),
        }
    }

    /// Plays an engine's move text, in its dialect; returns the move in the product's
    /// coordinates. A Xiongqi repetitive move is played as a loss for its player (6.3).
    fn play_text(&mut self, text: &str, dialect: Dialect) -> Result<String, String> {
        match self {
            Arbiter::Xiangqi { referee } => {
                let refused = |e: MoveTextError| referee.rules().cite_move_rules(&e.to_string());
                let mv = parse_uci(referee.position(), text, dialect).map_err(refused)?;
                referee.play(mv).expect("a parsed move is legal");
                Ok(format_uci(mv, Dialect::ZeroBased))
            }
            Arbiter::Xiongqi { game } => game.play_text(text).map(|mv| mv.to_string()).map_err(|e| e.to_string()),
        }
    }

    /// A recorded move as the engine writes it.
    fn engine_text(&self, mv: &str, dialect: Dialect) -> String {
        match self {
            Arbiter::Xiangqi { .. } => convert_ranks(mv, dialect),
            Arbiter::Xiongqi { .. } => mv.to_owned(),
        }
    }
}

/// A Xiangqi move in ranks 0..9 written in `dialect` (ranks 1..10).
fn convert_ranks(mv: &str, dialect: Dialect) -> String {
    let bytes = mv.as_bytes();
    if dialect == Dialect::ZeroBased || bytes.len() != 4 {
        return mv.to_owned();
    }
    let rank = |b: u8| (b - b'0' + 1).to_string();
    format!("{}{}{}{}", bytes[0] as char, rank(bytes[1]), bytes[2] as char, rank(bytes[3]))
}

struct Ending {
    outcome: Outcome,
    reason: String,
    termination: Termination,
    failure: Option<(Color, EngineError)>,
}

/// Sets up the arbiter and the record for `start`, playing its book moves.
fn begin(
    start: &Start,
    settings: &GameSettings,
    players: ByColor<String>,
    time_controls: ByColor<TimeControl>,
) -> (Arbiter, GameRecord, Option<Ending>) {
    let mut ending = None;
    let mut moves = Vec::new();
    let (arbiter, start_fen, from_startpos) = match start {
        Start::Xiangqi(opening) => {
            let config = RefereeConfig::with_timing(settings.rules, settings.violation_timing);
            let mut referee = Referee::new(opening.start.clone(), config);
            for &mv in &opening.moves {
                if referee.play(mv).is_err() {
                    ending = Some(Ending {
                        outcome: Outcome::Draw,
                        reason: format!("the opening's move {mv} is illegal"),
                        termination: Termination::Adjudication,
                        failure: None,
                    });
                    break;
                }
                moves.push(PlayedMove {
                    mv: format_uci(mv, Dialect::ZeroBased),
                    score: None,
                    depth: None,
                    elapsed: Duration::ZERO,
                });
            }
            let fen = opening.start.to_string();
            (Arbiter::Xiangqi { referee: Box::new(referee) }, fen, opening.start == Position::startpos())
        }
        Start::Xiongqi(position) => {
            let game = xiongqi::Refereed::new(position.clone());
            let startpos = *position == xiongqi::Position::startpos();
            (Arbiter::Xiongqi { game: Box::new(game) }, position.to_string(), startpos)
        }
    };
    let record = GameRecord {
        players,
        variant: start.variant(),
        start_fen,
        from_startpos,
        book_plies: moves.len(),
        moves,
        outcome: Outcome::Draw,
        reason: String::new(),
        termination: Termination::Rules,
        failure: None,
        overtime: None,
        illegal_move: None,
        failed_before_moving: None,
        violation_timing: settings.violation_timing,
        warnings: Vec::new(),
        time_controls,
    };
    (arbiter, record, ending)
}

/// Plays one game; `engines` by colour. Engine failures end the game as a loss for
/// the failing engine and are reported in the record; the caller restarts it.
pub fn play_game(engines: ByColor<&mut EngineProcess>, start: &Start, settings: &GameSettings) -> GameRecord {
    let mut engines = engines;
    let players = ByColor { red: engines.red.config().name.clone(), black: engines.black.config().name.clone() };
    // Each side's own clock where its engine has one (time odds), else the game's.
    let time_controls = ByColor::new_with(|color| {
        engines[color].config().time_control.clone().unwrap_or_else(|| settings.time_control.clone())
    });
    let mut clocks: ByColor<Option<Clock>> = ByColor::new_with(|color| match &time_controls[color] {
        TimeControl::Clock(periods) => Some(Clock::new(periods)),
        _ => None,
    });
    let (mut arbiter, mut record, mut ending) = begin(start, settings, players, time_controls.clone());
    for color in Color::ALL {
        if ending.is_none()
            && let Err(error) = engines[color].new_game()
        {
            ending = Some(failure(color, error));
        }
    }
    let mut adjudicator = Adjudicator::new(settings.adjudication);
    (0..record.book_plies).for_each(|_| adjudicator.book_ply());
    let mut moved = ByColor { red: false, black: false };
    while ending.is_none() {
        if let Some(ruling) = arbiter.ruling() {
            ending = Some(Ending {
                outcome: ruling.outcome,
                reason: format!("{} ({})", ruling.reason, ruling.article),
                termination: Termination::Rules,
                failure: None,
            });
            break;
        }
        if settings.max_plies.is_some_and(|max| record.moves.len() >= max) {
            ending = Some(Ending {
                outcome: Outcome::Draw,
                reason: "maximum game length".to_owned(),
                termination: Termination::Adjudication,
                failure: None,
            });
            break;
        }
        let side = arbiter.side_to_move();
        let engine = &mut engines[side];
        let time_control = &time_controls[side];
        let limits = limits_text(engine.config().protocol, time_control, &clocks, side);
        let timeout = match &clocks[side] {
            Some(clock) => clock.remaining() + settings.time_margin + Duration::from_millis(200),
            None => match *time_control {
                TimeControl::MoveTime(t) => t + settings.time_margin + Duration::from_millis(200),
                _ => settings.hang_timeout,
            },
        };
        let mut position = position_text(&record, &arbiter, engine);
        let mut limits = limits;
        if settings.violation_timing == ViolationTiming::AfterWarning
            && let Some(banned) = ban_warned_moves(&arbiter, engine.config(), &mut position, &mut limits)
        {
            record.warnings.push(format!("{}:{banned}", record.moves.len() + 1));
        }
        let reply = match engine.go(&position, &limits, timeout) {
            Ok(reply) => reply,
            // Lost on time, and still searching: its late bestmove would answer the
            // next game's first `go`, so it is reported as a failure to be restarted.
            Err(error @ EngineError::Timeout { .. })
                if clocks[side].is_some() || matches!(time_control, TimeControl::MoveTime(_)) =>
            {
                if let EngineError::Timeout { waited, .. } = &error {
                    record.overtime = Some(*waited);
                }
                ending = Some(Ending { failure: Some((side, error)), ..time_forfeit(side, &record.players) });
                break;
            }
            Err(error) => {
                ending = Some(failure(side, error));
                break;
            }
        };
        let past_clock = match (clocks[side].as_mut(), time_control) {
            (Some(clock), _) => clock.charge(reply.elapsed, settings.time_margin).is_err(),
            (None, TimeControl::MoveTime(time)) => reply.elapsed > *time + settings.time_margin,
            (None, _) => false,
        };
        if past_clock {
            record.overtime = Some(reply.elapsed);
            ending = Some(time_forfeit(side, &record.players));
            break;
        }
        let mv = match arbiter.play_text(&reply.bestmove, engine.config().dialect) {
            Ok(mv) => mv,
            Err(error) => {
                record.illegal_move = Some(reply.bestmove.clone());
                ending = Some(Ending {
                    outcome: Outcome::Win(!side),
                    reason: format!("{} played an illegal move: {error}", record.players[side]),
                    termination: Termination::IllegalMove,
                    failure: None,
                });
                break;
            }
        };
        record.moves.push(PlayedMove { mv, score: reply.score, depth: reply.depth, elapsed: reply.elapsed });
        moved[side] = true;
        // The rules come first: a move that ends the game by them is not adjudicated.
        if let Some(verdict) = adjudicator.after_ply(side, reply.score)
            && arbiter.ruling().is_none()
        {
            ending = Some(adjudged(verdict, &record.players));
        }
    }
    let ending = ending.expect("the loop ends with an ending");
    let loser = match ending.outcome {
        Outcome::Win(winner) => Some(!winner),
        Outcome::Draw => None,
    };
    record.failed_before_moving = match ending.termination {
        Termination::EngineFailure | Termination::IllegalMove => loser.filter(|&side| !moved[side]),
        _ => None,
    };
    record.outcome = ending.outcome;
    record.reason = ending.reason;
    record.termination = ending.termination;
    record.failure = ending.failure;
    record
}

fn time_forfeit(side: Color, players: &ByColor<String>) -> Ending {
    Ending {
        outcome: Outcome::Win(!side),
        reason: format!("{} loses on time", players[side]),
        termination: Termination::TimeForfeit,
        failure: None,
    }
}

fn failure(color: Color, error: EngineError) -> Ending {
    Ending {
        outcome: Outcome::Win(!color),
        reason: format!("{color:?} engine failed: {error}"),
        termination: Termination::EngineFailure,
        failure: Some((color, error)),
    }
}

fn adjudged(verdict: Verdict, players: &ByColor<String>) -> Ending {
    let (outcome, reason) = match verdict {
        Verdict::Draw => (Outcome::Draw, "adjudicated a draw by score".to_owned()),
        Verdict::Resigns(side) => (Outcome::Win(!side), format!("{} resigns (adjudicated by score)", players[side])),
    };
    Ending { outcome, reason, termination: Termination::Adjudication, failure: None }
}
