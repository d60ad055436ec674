//! The judge: rules a game given as a start position and moves, and describes the
//! ruling, each ply's nature and where a referee would have ended the game in play
//! ([`Referee::ended`]) as JSON, for people and scripts (`xq-engine judge`).

use serde_json::{Value, json};

use super::identity::Identities;
use super::nature::{AllowedNatures, Nature, allowed_natures, classify, nature_names};
use super::{Reason, Referee, RefereeConfig, RuleSet, UnknownRuleSet, ViolationTiming};
use crate::variant::Variant;
use crate::xiangqi::fen::{self, FenError, PositionError};
use crate::xiangqi::notation::{MoveTextError, parse_any};
use crate::xiangqi::pgn::PgnGame;
use crate::xiangqi::{Move, Position};
use crate::xiongqi::fen::XiongqiFenError;
use crate::xiongqi::game::XiongqiMoveError;

/// A game to rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JudgeRequest {
    /// The start position; the standard one when absent.
    pub fen: Option<String>,
    /// The moves: UCI coordinates (ranks 0..9), or any notation game collections
    /// write (Xiangqi only: [`crate::xiangqi::notation::parse_any`]).
    pub moves: Vec<String>,
    /// The rule set (Xiangqi only: Xiongqi has its own rules).
    pub rules: RuleSet,
    /// The game.
    pub variant: Variant,
    /// When a lone perpetual loses: `ended` tells where a referee with this timing
    /// ended the game (a game played with the arbiter's warnings says so in its PGN).
    pub timing: ViolationTiming,
}

/// Why a game could not be ruled.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JudgeError {
    /// The request is not a JSON object of the expected shape.
    #[error("bad request: {0}")]
    Request(String),
    /// The start position is not a playable FEN.
    #[error("invalid FEN: {0}")]
    Fen(#[from] FenError),
    /// The Xiongqi start position is not a valid FEN.
    #[error("invalid FEN: {0}")]
    XiongqiFen(#[from] XiongqiFenError),
    /// A Xiongqi move cannot be played.
    #[error("ply {ply} ({text}): {error}")]
    XiongqiMove {
        /// 1-based ply number.
        ply: usize,
        /// The move as given.
        text: String,
        /// Why it cannot be played.
        error: XiongqiMoveError,
    },
    /// Moves follow the end of the game.
    #[error("ply {0}: the game was already over")]
    AfterTheEnd(usize),
    /// A move cannot be played.
    #[error("ply {ply} ({text}): {}", .rules.cite_move_rules(&.error.to_string()))]
    Move {
        /// 1-based ply number.
        ply: usize,
        /// The move as given.
        text: String,
        /// Why it cannot be played.
        error: MoveTextError,
        /// The rule set judging, whose articles the message cites.
        rules: RuleSet,
    },
}

impl From<UnknownRuleSet> for JudgeError {
    fn from(error: UnknownRuleSet) -> Self {
        JudgeError::Request(error.to_string())
    }
}

impl JudgeRequest {
    /// Reads `{"fen": ..., "moves": [...] or "m1 m2", "rules": ..., "timing": ...}`;
    /// absent fields take the start position, no moves, `default_rules` and
    /// `default_timing`.
    pub fn from_json(line: &str, default_rules: RuleSet, default_timing: ViolationTiming) -> Result<Self, JudgeError> {
        let value: Value = serde_json::from_str(line).map_err(|e| JudgeError::Request(format!("not JSON: {e}")))?;
        if !value.is_object() {
            return Err(JudgeError::Request("expected a JSON object".to_owned()));
        }
        let fen = match &value["fen"] {
            Value::Null => None,
            Value::String(text) => Some(text.clone()),
            _ => return Err(JudgeError::Request("\"fen\" must be a string".to_owned())),
        };
        let moves = match &value["moves"] {
            Value::Null => Vec::new(),
            Value::String(text) => text.split_whitespace().map(str::to_owned).collect(),
            Value::Array(items) => items
                .iter()
                .map(|m| m.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| JudgeError::Request("\"moves\" must hold strings".to_owned()))?,
            _ => {
                return Err(JudgeError::Request("\"moves\" must be a list of strings".to_owned()));
            }
        };
        let rules = match &value["rules"] {
            Value::Null => default_rules,
            Value::String(name) => name.parse()?,
            _ => return Err(JudgeError::Request("\"rules\" must be a string".to_owned())),
        };
        let variant = match &value["variant"] {
            Value::Null => Variant::Xiangqi,
            Value::String(name) => {
                name.parse().map_err(|e: crate::variant::UnknownVariant| JudgeError::Request(e.to_string()))?
            }
            _ => return Err(JudgeError::Request("\"variant\" must be a string".to_owned())),
        };
        let timing = match &value["timing"] {
            Value::Null => default_timing,
            Value::String(name) => name.parse().map_err(JudgeError::Request)?,
            _ => return Err(JudgeError::Request("\"timing\" must be a string".to_owned())),
        };
        Ok(JudgeRequest { fen, moves, rules, variant, timing })
    }

    /// A game read from PGN: its `[FEN]` tag and moves, and the `[ViolationTiming]` it
    /// was played with, `untagged` when it has no such tag.
    pub fn from_pgn(game: &PgnGame, rules: RuleSet, untagged: ViolationTiming) -> Self {
        let variant = game.tag("Variant").and_then(|v| v.parse().ok()).unwrap_or_default();
        let timing = game.tag("ViolationTiming").and_then(|t| t.parse().ok()).unwrap_or(untagged);
        JudgeRequest { fen: game.tag("FEN").map(str::to_owned), moves: game.moves.clone(), rules, variant, timing }
    }
}

/// Rules the game: the cycle its last move closed, if any, whatever the number of
/// occurrences; otherwise any other ruling it reached (checkmate, stalemate, the
/// natural move count). Returns the JSON description (each ply's move, nature, chase
/// targets and the position after it as FEN) and what makes the start position
/// unreachable, if anything.
pub fn judge(request: &JudgeRequest) -> Result<(Value, Vec<PositionError>), JudgeError> {
    if request.variant == Variant::Xiongqi {
        return judge_xiongqi(request).map(|verdict| (verdict, Vec::new()));
    }
    let (start, warnings) = match &request.fen {
        Some(text) => fen::parse_composed(text)?,
        None => (Position::startpos(), Vec::new()),
    };
    // Where a referee would have ended the game in play, as a verification job sees it.
    let mut referee = Referee::new(start.clone(), RefereeConfig::with_timing(request.rules, request.timing));
    let mut ids = Identities::new(&start);
    let mut plies = Vec::with_capacity(request.moves.len());
    for (index, text) in request.moves.iter().enumerate() {
        let before = referee.position().clone();
        let mv = parse_any(&before, text).map_err(|error| JudgeError::Move {
            ply: index + 1,
            text: text.clone(),
            error,
            rules: request.rules,
        })?;
        let mut ply = ply_json(&classify(&before, &ids, mv), &allowed_natures(&before, &ids, mv), mv);
        ids.apply(mv);
        referee.play(mv).expect("a parsed move is legal");
        ply["fen"] = json!(fen::to_fen(referee.position()));
        plies.push(ply);
    }
    let ruling = referee.rule_last_cycle().or(referee.ruling());
    let ended = referee.ended().map(|(ply, ruling)| {
        json!({"ply": ply, "result": ruling.outcome.pgn(), "reason": ruling.reason.to_string(), "article": ruling.article})
    });
    let verdict = json!({
        "result": ruling.map_or("*", |r| r.outcome.pgn()),
        "reason": ruling.map(|r| r.reason.to_string()),
        "article": ruling.map(|r| r.article),
        "ended": ended,
        "plies": plies,
    });
    Ok((verdict, warnings))
}

/// Rules a Xiongqi game by its own rules (xiongqi-rules.txt section 6): a repetitive
/// move loses for its player (6.3); check is reported, never ruled on (1.1).
fn judge_xiongqi(request: &JudgeRequest) -> Result<Value, JudgeError> {
    use crate::xiongqi::{self, Refereed};
    let start = match &request.fen {
        Some(text) => xiongqi::fen::parse(text)?,
        None => xiongqi::Position::startpos(),
    };
    let mut game = Refereed::new(start);
    let mut plies = Vec::with_capacity(request.moves.len());
    for (index, text) in request.moves.iter().enumerate() {
        if game.lost_by_repetition() || game.ruling().is_some_and(|r| r.reason == Reason::TerminalCaptured) {
            return Err(JudgeError::AfterTheEnd(index + 1));
        }
        let mover = game.position().side_to_move();
        let after = |game: &Refereed| xiongqi::fen::to_fen(game.position());
        match game.play_text(text) {
            Ok(mv) if game.lost_by_repetition() => {
                plies.push(json!({"move": mv.to_string(), "nature": "repetitive", "fen": after(&game)}))
            }
            Ok(mv) => {
                let check = xiongqi::movegen::in_check(game.position(), !mover);
                let nature = if check { "check" } else { "idle" };
                plies.push(json!({"move": mv.to_string(), "nature": nature, "fen": after(&game)}));
            }
            Err(error) => return Err(JudgeError::XiongqiMove { ply: index + 1, text: text.clone(), error }),
        }
    }
    let ruling = game.ruling();
    Ok(json!({
        "result": ruling.map_or("*", |r| r.outcome.pgn()),
        "reason": ruling.map(|r| r.reason.to_string()),
        "article": ruling.map(|r| r.article),
        "plies": plies,
    }))
}

fn ply_json(nature: &Nature, allowed: &AllowedNatures, mv: Move) -> Value {
    let natures = nature_names(nature, allowed);
    let mut targets: Vec<_> = nature.chases.iter().map(|t| (t.target_square, t.target_kind)).collect();
    targets.dedup();
    let chases: Vec<Value> = targets
        .into_iter()
        .map(|(square, kind)| {
            let by: Vec<String> = nature
                .chases
                .iter()
                .filter(|t| t.target_square == square)
                .map(|t| format!("{} {}", t.attacker_kind.name(), t.attacker_square))
                .collect();
            json!({"target": format!("{} {square}", kind.name()), "by": by})
        })
        .collect();
    json!({"move": mv.to_string(), "nature": natures[0], "natures": natures, "chases": chases})
}
