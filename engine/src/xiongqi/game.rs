//! A Xiongqi game: a position and its history, which the repetition rule needs (6.3: a
//! move that recreates an earlier position by the same move that led to it before is
//! not a legal move).

use crate::xiangqi::rules::{Outcome, Reason, Ruling};
use std::collections::HashMap;

use super::movegen::pseudo_legal_moves;
use super::position::Undo;
use super::{Position, XiongqiMove};

/// A position with the moves that led to each position of the game so far.
#[derive(Clone, Debug)]
pub struct Game {
    position: Position,
    undos: Vec<Undo>,
    /// For each position that occurred, the moves that led to it (none for the start).
    arrivals: HashMap<u64, Vec<XiongqiMove>>,
    start_hash: u64,
    fifty_moves: FiftyMoves,
}

/// How the 50-move rule (6.5) applies: "either claimed or automatic" by setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FiftyMoves {
    /// The game is drawn as soon as the count is reached (the default).
    #[default]
    Automatic,
    /// A player may claim the draw ([`Game::can_claim_fifty_moves`]); the game goes on.
    Claimed,
}

/// A move the game does not allow.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum XiongqiMoveError {
    /// The pieces do not move that way, or it is not the mover's piece.
    #[error("{0} is not allowed by the movement rules here")]
    NotAMove(XiongqiMove),
    /// It repeats a position by the move that led to it before (rule 6.3).
    #[error("{0} is a repetitive move (rule 6.3)")]
    Repetitive(XiongqiMove),
    /// The text is not a move such as `a3a4` or `d7d8e`.
    #[error("'{0}' is not a Xiongqi move: expected two squares (rows 1-8) and an optional promotion letter")]
    Syntax(String),
}

impl Game {
    /// A game starting at `position`, which counts as having occurred.
    pub fn new(position: Position) -> Self {
        let start_hash = position.hash();
        let arrivals = HashMap::from([(start_hash, Vec::new())]);
        Game { position, undos: Vec::new(), arrivals, start_hash, fifty_moves: FiftyMoves::default() }
    }

    /// Sets how the 50-move rule applies.
    pub fn set_fifty_moves(&mut self, rule: FiftyMoves) {
        self.fifty_moves = rule;
    }

    /// Whether a draw under the 50-move rule may be claimed now (6.5).
    pub fn can_claim_fifty_moves(&self) -> bool {
        self.position.halfmove_clock() >= 100
    }

    /// The current position.
    pub fn position(&self) -> &Position {
        &self.position
    }

    /// Whether playing `mv` (allowed by the movement rules) would be repetitive.
    pub fn is_repetitive(&mut self, mv: XiongqiMove) -> bool {
        let undo = self.position.make_move(mv);
        let repeated = self.arrivals.get(&self.position.hash()).is_some_and(|moves| moves.contains(&mv));
        self.position.unmake_move(undo);
        repeated
    }

    /// The legal moves: those the movement rules allow, less the repetitive ones.
    pub fn legal_moves(&mut self) -> Vec<XiongqiMove> {
        let mut moves = pseudo_legal_moves(&self.position);
        moves.retain(|&mv| !self.is_repetitive(mv));
        moves
    }

    /// Plays `mv` if the movement rules allow it; a repetitive move is refused, as the
    /// rules make it a loss for whoever plays it.
    pub fn play(&mut self, mv: XiongqiMove) -> Result<Undo, XiongqiMoveError> {
        if !pseudo_legal_moves(&self.position).contains(&mv) {
            return Err(XiongqiMoveError::NotAMove(mv));
        }
        if self.is_repetitive(mv) {
            return Err(XiongqiMoveError::Repetitive(mv));
        }
        Ok(self.push(mv))
    }

    pub(crate) fn push(&mut self, mv: XiongqiMove) -> Undo {
        let undo = self.position.make_move(mv);
        self.arrivals.entry(self.position.hash()).or_default().push(mv);
        self.undos.push(undo);
        undo
    }

    /// Reads a move such as `a3a4` or `d7d8e` (rows 1..8, promotion letter in either
    /// case) and plays it if legal.
    pub fn play_text(&mut self, text: &str) -> Result<XiongqiMove, XiongqiMoveError> {
        let syntax = || XiongqiMoveError::Syntax(text.to_owned());
        if !text.is_ascii() || text.len() < 4 {
            return Err(syntax());
        }
        let split = text[1..].find(|c: char| c.is_ascii_alphabetic()).ok_or_else(syntax)? + 1;
        let rest = &text[split..];
        let to_end = rest[1..].find(|c: char| c.is_ascii_alphabetic()).map_or(rest.len(), |i| i + 1);
        let from = super::Square::parse_with_label(&text[..split], 1).ok_or_else(syntax)?;
        let to = super::Square::parse_with_label(&rest[..to_end], 1).ok_or_else(syntax)?;
        let promotion = match &rest[to_end..] {
            "" => None,
            letter if letter.len() == 1 => {
                Some(super::PieceKind::from_letter(letter.chars().next().expect("a letter")).ok_or_else(syntax)?)
            }
            _ => return Err(syntax()),
        };
        let mv = XiongqiMove { from, to, promotion };
        self.play(mv).map(|_| mv)
    }

    /// Takes back the last move.
    pub fn undo(&mut self) {
        let Some(undo) = self.undos.pop() else { return };
        let hash = self.position.hash();
        let no_arrival_left = self.arrivals.get_mut(&hash).is_some_and(|moves| {
            moves.pop();
            moves.is_empty()
        });
        // The start position stays: it occurred without a move leading to it.
        if no_arrival_left && hash != self.start_hash {
            self.arrivals.remove(&hash);
        }
        self.position.unmake_move(undo);
    }

    /// Perft under the repetition rule, the history starting at the current position.
    pub fn perft(&mut self, depth: u32) -> u64 {
        if depth == 0 {
            return 1;
        }
        let moves = self.legal_moves();
        if depth == 1 {
            return moves.len() as u64;
        }
        let mut nodes = 0;
        for mv in moves {
            self.push(mv);
            nodes += self.perft(depth - 1);
            self.undo();
        }
        nodes
    }
}

impl Game {
    /// The game's end, if it has ended: a terminal piece captured (6.1), no legal move
    /// (6.2), only terminal pieces left (6.4), or 50 moves by each side without a
    /// capture or a soldier move (6.5, when the rule is automatic). A repetitive move is refused by
    /// [`Game::play`]; a referee rules it a loss for its player (6.3).
    pub fn ruling(&mut self) -> Option<Ruling> {
        let us = self.position.side_to_move();
        if self.position.terminal(us).is_none() {
            return Some(Ruling {
                outcome: Outcome::Win(!us),
                reason: Reason::TerminalCaptured,
                article: "Xiongqi 6.1",
            });
        }
        if self.legal_moves().is_empty() {
            return Some(Ruling { outcome: Outcome::Win(!us), reason: Reason::NoLegalMove, article: "Xiongqi 6.2" });
        }
        let only_terminals = crate::color::Color::ALL
            .iter()
            .all(|&c| self.position.pieces_of(c).all(|(_, piece)| piece.kind.is_terminal()));
        if only_terminals {
            return Some(Ruling { outcome: Outcome::Draw, reason: Reason::OnlyTerminals, article: "Xiongqi 6.4" });
        }
        if self.fifty_moves == FiftyMoves::Automatic && self.can_claim_fifty_moves() {
            return Some(Ruling { outcome: Outcome::Draw, reason: Reason::FiftyMoves, article: "Xiongqi 6.5" });
        }
        None
    }
}

/// A game as a referee keeps it. [`Game::play`] refuses a repetitive move, but an
/// engine may still make one, and the rules make it a loss for its player (6.3): the
/// referee accepts it as the game's last move and rules so. The worker's referee, the
/// coordinator's replay and the judge all keep Xiongqi games this way.
#[derive(Clone, Debug)]
pub struct Refereed {
    game: Game,
    lost_by_repetition: Option<Ruling>,
}

impl Refereed {
    /// A game starting at `position`.
    pub fn new(position: Position) -> Self {
        Refereed { game: Game::new(position), lost_by_repetition: None }
    }

    /// The current position.
    pub fn position(&self) -> &Position {
        self.game.position()
    }

    /// Reads and plays a move as [`Game::play_text`] does, except that a repetitive
    /// move is accepted: it ends the game, lost by its player, and is returned.
    pub fn play_text(&mut self, text: &str) -> Result<XiongqiMove, XiongqiMoveError> {
        let mover = self.game.position().side_to_move();
        match self.game.play_text(text) {
            Err(XiongqiMoveError::Repetitive(mv)) => {
                let reason = Reason::RepetitiveMove;
                self.lost_by_repetition =
                    Some(Ruling { outcome: Outcome::Win(!mover), reason, article: "Xiongqi 6.3" });
                Ok(mv)
            }
            played => played,
        }
    }

    /// Whether the last move was repetitive, which lost the game.
    pub fn lost_by_repetition(&self) -> bool {
        self.lost_by_repetition.is_some()
    }

    /// The ruling the game has reached: a repetitive move's, else the game's own.
    pub fn ruling(&mut self) -> Option<Ruling> {
        self.lost_by_repetition.or_else(|| self.game.ruling())
    }
}
