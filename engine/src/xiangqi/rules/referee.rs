//! Referees following a game move by move: [`Referee`] under one rule set (matches,
//! self-play, the judge) and [`Panel`] under several at once (rule verification).
//!
//! A panel replays the game once for all its rule sets: the move's legality, the
//! position, the repetition count, whether the side to move has a legal move, and a
//! repeated cycle's natures are the same under every rule set; only the rulings, the
//! natural move count and the CXQ counters are each rule set's own. Three referees
//! replaying a game apart repeated all of that three times, which was most of what a
//! verification under three rule sets cost.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::identity::Identities;
use super::nature::Nature;
use super::{Outcome, Reason, RuleSet, Ruling, cxq, cycle_natures, rule_natures};
use crate::color::Color;
use crate::xiangqi::movegen::has_legal_move;
use crate::xiangqi::{IllegalMove, Move, Position, Undo};

/// When the referee rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RefereeConfig {
    /// The rule set.
    pub rules: RuleSet,
    /// Occurrences of the repetition being made at which a forbidden perpetual is ruled
    /// (default 3, [`ViolationTiming`]): the first occurrence whose window shows the
    /// lone violation is the third or a later one (the warning's moment), and the loss
    /// falls `violation_occurrences - 3` occurrences after it if each window still
    /// shows it.
    pub violation_occurrences: u32,
    /// Occurrences of the repetition being made at which a repetition without violation
    /// is drawn (default 4).
    pub draw_occurrences: u32,
    /// Plies without capture that draw the game (default 100); `None` for no limit.
    pub natural_move_plies: Option<u32>,
    /// Checks per side that count towards the natural move count (default 10).
    pub counted_checks: u32,
}

impl RefereeConfig {
    /// The defaults under `rules`: the Asian text has no natural move count.
    pub fn for_rules(rules: RuleSet) -> Self {
        let natural_move_plies = if rules == RuleSet::Asian { None } else { Some(100) };
        RefereeConfig { rules, natural_move_plies, ..RefereeConfig::default() }
    }

    /// The defaults under `rules`, a lone violation ruled with `timing`.
    pub fn with_timing(rules: RuleSet, timing: ViolationTiming) -> Self {
        RefereeConfig { violation_occurrences: timing.occurrences(rules), ..RefereeConfig::for_rules(rules) }
    }
}

/// When a lone violation of the repetition rules (a perpetual check or chase by one
/// side) is ruled. The books have the arbiter warn first; engines cannot hear a warning,
/// so engine matches rule at the warning's moment instead, as engines' own repetition
/// rules do (Fairy-Stockfish and the Pikafish family end such a game at the threefold
/// repetition). A match runner can play the books' way by banning the repeating move
/// at the warning (UCCI `banmoves`), then rule with [`ViolationTiming::AfterWarning`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ViolationTiming {
    /// At the threefold repetition, the position's third occurrence: the default, since
    /// an engine that is not told to change its moves would only repeat them.
    #[default]
    Threefold,
    /// After the arbiter's warning at the threefold repetition, when the violator
    /// repeats anyway: WXF 3.1.C and 17.3.G.III rule the loss "if the same moves were
    /// repeated another cycle", the fourth occurrence (the computer rule set, which
    /// keeps WXF's perpetual check, likewise); the Asian Section 4 rule 3 when the
    /// violator, "asked by the referee to alter, ... repeats the violation for three
    /// times": asked at the threefold repetition (the text names no other moment; WXF's
    /// 17.3.G does), three more cycles, the sixth occurrence. The CXQ rules count
    /// consecutive checks and chases instead and are not affected.
    AfterWarning,
}

impl ViolationTiming {
    /// Occurrences of the repeated position at which the violation is ruled.
    pub fn occurrences(self, rules: RuleSet) -> u32 {
        match (self, rules) {
            (ViolationTiming::Threefold, _) => 3,
            (ViolationTiming::AfterWarning, RuleSet::Asian) => 6,
            (ViolationTiming::AfterWarning, _) => 4,
        }
    }

    /// The name used on command lines, options and PGN tags.
    pub fn name(self) -> &'static str {
        match self {
            ViolationTiming::Threefold => "threefold",
            ViolationTiming::AfterWarning => "after-warning",
        }
    }
}

impl std::str::FromStr for ViolationTiming {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "threefold" => Ok(ViolationTiming::Threefold),
            "after-warning" => Ok(ViolationTiming::AfterWarning),
            _ => Err(format!("unknown violation timing '{text}': expected threefold or after-warning")),
        }
    }
}

impl Default for RefereeConfig {
    fn default() -> Self {
        RefereeConfig {
            rules: RuleSet::Wxf,
            violation_occurrences: 3,
            draw_occurrences: 4,
            natural_move_plies: Some(100),
            counted_checks: 10,
        }
    }
}

/// Rules a whole game under one rule set, fed one move at a time: a [`Panel`] of one.
#[derive(Clone, Debug)]
pub struct Referee(Panel);

impl Referee {
    /// A referee for the game starting at `start`.
    pub fn new(start: Position, config: RefereeConfig) -> Self {
        Referee(Panel::new(start, &[config]))
    }

    /// The current position.
    pub fn position(&self) -> &Position {
        self.0.position()
    }

    /// The rule set refereeing.
    pub fn rules(&self) -> RuleSet {
        self.0.officials[0].config.rules
    }

    /// The ruling, once the game has ended.
    pub fn ruling(&self) -> Option<Ruling> {
        self.ended().map(|(_, ruling)| ruling)
    }

    /// The first ruling and the ply after which it fell (1-based; 0 for a start
    /// position already over): where a referee ends the game in play.
    pub fn ended(&self) -> Option<(usize, Ruling)> {
        self.0.officials[0].ended
    }

    /// The moves played.
    pub fn moves(&self) -> impl Iterator<Item = Move> + '_ {
        self.0.undos.iter().map(|u| u.mv())
    }

    /// Plays `mv` and returns the ruling if the game has now ended. Moves after the
    /// end are refused as illegal only if they are; the first ruling stands.
    pub fn play(&mut self, mv: Move) -> Result<Option<Ruling>, IllegalMove> {
        self.0.play(mv)?;
        Ok(self.ruling())
    }

    /// The repetition the current position closed, if it occurred before: the moves
    /// of its window (the repetition being made, [`Repetition`]), and their start position.
    pub fn last_cycle(&self) -> Option<(Position, Vec<Move>)> {
        let panel = &self.0;
        last_cycle(&panel.position, &panel.undos, panel.repetitions.get(&panel.position.hash())?)
    }

    /// The moves an arbiter's warning forbids the side to move: at the threefold (or a
    /// later) repetition of the current position whose window the side to move alone
    /// violates (a perpetual check or chase), the moves it played from this position
    /// at its earlier occurrences in the window, which repeat the violation (WXF
    /// 17.3.G.III: it "would have to change his moves"). A match runner bans them for
    /// the engine (UCCI `banmoves`, UCI `go searchmoves` with the other legal moves)
    /// and rules the loss with [`ViolationTiming::AfterWarning`] if it repeats anyway.
    /// Empty when no warning applies, or when every legal move is among them (the side
    /// cannot change, and the ruling decides).
    pub fn warned_moves(&self) -> Vec<Move> {
        let panel = &self.0;
        let hash = panel.position.hash();
        let counted = panel.repetitions.get(&hash).map_or(0, |repetition| repetition.count);
        if self.rules() == RuleSet::Cxq || counted < WINDOW_OCCURRENCES as u32 {
            return Vec::new();
        }
        let Some((start, moves)) = self.last_cycle() else { return Vec::new() };
        let ruling = super::rule_cycle(&start, &moves, self.rules()).0;
        let mover = panel.position.side_to_move();
        let violation = matches!(ruling.reason, Reason::PerpetualCheck | Reason::PerpetualChase);
        if !violation || ruling.outcome != Outcome::loss_of(mover) {
            return Vec::new();
        }
        let window_start = panel.undos.len() - moves.len();
        let mut warned: Vec<Move> = Vec::new();
        for ply in (window_start..panel.undos.len()).step_by(2).filter(|&ply| panel.hashes[ply] == hash) {
            let mv = panel.undos[ply].mv();
            if !warned.contains(&mv) {
                warned.push(mv);
            }
        }
        let legal = crate::xiangqi::movegen::legal_moves(&panel.position);
        if legal.iter().all(|mv| warned.contains(mv)) {
            return Vec::new();
        }
        warned
    }

    /// Rules the cycle the last move closed, whatever the number of occurrences. The
    /// CXQ rules rule no repetitions (their counters rule as the game goes): `None`.
    pub fn rule_last_cycle(&self) -> Option<Ruling> {
        if self.rules() == RuleSet::Cxq {
            return None;
        }
        let (start, moves) = self.last_cycle()?;
        Some(super::rule_cycle(&start, &moves, self.rules()).0)
    }
}

/// Referees under several rule sets following one game, replayed once (see the module
/// docs); each remembers its first ruling. The bookkeeping per ply is constant (a
/// hash-count update, the natural move counters, and for CXQ the move's nature); a
/// cycle is classified only when a position recurs.
#[derive(Clone, Debug)]
pub struct Panel {
    position: Position,
    undos: Vec<Undo>,
    /// Hash of the position before each ply, then the current one last.
    hashes: Vec<u64>,
    /// The repetition being made of each position the game has held.
    repetitions: HashMap<u64, Repetition, BuildHasherDefault<KeyHasher>>,
    officials: Vec<Official>,
}

/// The repetition of one position being made: its occurrences since the players last
/// changed the moves that lead back to it.
///
/// WXF 17.3.G judges a position "repeated consecutively", and 3.2.B and 17.3.G.II draw
/// the fourfold repetition only when the players were not "willing to change their
/// moves" ("if another cycle of the moves were repeated"). A repetition's first two
/// cycles may be any; each later one repeats, move for move, one of the two before it
/// (the threefold window it closes). A cycle that repeats neither starts the count
/// again at the threefold window it closes: the occurrences before that window are
/// not of the repetition being made. So two idle round trips before a perpetual
/// neither draw it at its first cycle nor hide it: its own cycles repeated rule it.
/// Two cycles alternating from one position (Diagram 80) stay one repetition, judged
/// together, and so does a cycle that comes back after another (chase, idle, chase).
///
/// The count depends only on the cycles since the earliest counted occurrence, so a
/// game started there is ruled alike (the metamorphic suffix property).
#[derive(Clone, Debug)]
struct Repetition {
    /// The plies after which the position stood, its last three occurrences oldest
    /// first (the first one repeated while it has fewer): the window judged.
    plies: [usize; 3],
    /// Its occurrences in the repetition being made (three or more once the position
    /// occurred three times).
    count: u32,
    /// The ply of the position's first occurrence in the game: the window of the
    /// `mutant-first-occurrence-window` build.
    first_in_game: usize,
    /// For each official, the lone violation its last windows showed (the side that
    /// would lose), and in how many occurrences in a row: the warning falls at the
    /// first, the loss as many later as the timing says ([`ViolationTiming`]).
    violations: Vec<Option<(Outcome, u32)>>,
}

impl Repetition {
    fn first(ply: usize) -> Self {
        Repetition { plies: [ply; 3], count: 1, first_in_game: ply, violations: Vec::new() }
    }

    /// The ply its window starts at: the earliest of its last three occurrences (the
    /// threefold repetition of WXF 17.3.G, whose moves the arbiter judges).
    fn window_start(&self) -> usize {
        if cfg!(feature = "mutant-first-occurrence-window") { self.first_in_game } else { self.plies[0] }
    }

    /// The position stands again after `ply`, the last of `undos`.
    fn recur(&mut self, ply: usize, undos: &[Undo]) {
        let [earliest, before, last] = self.plies;
        let cycle = |from: usize, to: usize| undos[from..to].iter().map(|undo| undo.mv());
        let repeats = self.count < WINDOW_OCCURRENCES as u32
            || cycle(earliest, before).eq(cycle(last, ply))
            || cycle(before, last).eq(cycle(last, ply));
        self.plies = [before, last, ply];
        if repeats || cfg!(feature = "mutant-game-occurrences") {
            self.count += 1;
        } else {
            self.count = WINDOW_OCCURRENCES as u32;
            self.violations.clear();
        }
    }

    /// Counts whether the window of this occurrence shows `official` a lone violation
    /// (the outcome it would rule), and returns in how many occurrences in a row it has.
    fn count_violation(&mut self, official: usize, officials: usize, violation: Option<Outcome>) -> u32 {
        if self.violations.len() < officials {
            self.violations.resize(officials, None);
        }
        let shown = match (violation, self.violations[official]) {
            (None, _) => None,
            (Some(outcome), Some((before, times))) if before == outcome => Some((outcome, times + 1)),
            (Some(outcome), _) => Some((outcome, 1)),
        };
        self.violations[official] = shown;
        shown.map_or(0, |(_, times)| times)
    }
}

/// What one rule set's referee keeps beyond the game itself.
#[derive(Clone, Debug)]
struct Official {
    config: RefereeConfig,
    natural: NaturalMoveCount,
    /// Pieces followed from the start, and the CXQ counters, for the `cxq` rule set.
    cxq: Option<(Identities, cxq::CxqCounters)>,
    ended: Option<(usize, Ruling)>,
}

/// Hashes a position's Zobrist key as itself: the keys are uniformly random already,
/// and hashing them again cost a verification's referees a twentieth of their time.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

/// The natural move count: plies since the last capture, not counting each side's
/// checks beyond the allowed number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct NaturalMoveCount {
    counted_plies: u32,
    checks: [u32; 2],
}

impl NaturalMoveCount {
    /// The count at a position whose FEN says `clock` plies were played since the last
    /// capture: Article 8 counts from the last capture, not from where a game's record
    /// starts, and a book's or a collection's FEN carries the plies before it. Which of
    /// them gave check is not known; they all count.
    fn from_clock(clock: u32) -> Self {
        NaturalMoveCount { counted_plies: clock, checks: [0; 2] }
    }

    /// Counts a ply of `mover`: a capture starts the count again; a check beyond the
    /// `counted_checks` of its side is not counted.
    fn count(&mut self, mover: Color, capture: bool, check: bool, counted_checks: u32) {
        if capture {
            *self = NaturalMoveCount::default();
            return;
        }
        if check {
            self.checks[mover.index()] += 1;
            if self.checks[mover.index()] > counted_checks {
                return;
            }
        }
        self.counted_plies += 1;
    }
}

impl Panel {
    /// Referees under `configs` for the game starting at `start`; a start position
    /// that is already over is ruled at ply 0.
    pub fn new(start: Position, configs: &[RefereeConfig]) -> Self {
        let hash = start.hash();
        let terminal = terminal_reason(&start);
        let officials = configs
            .iter()
            .map(|&config| Official {
                config,
                natural: NaturalMoveCount::from_clock(start.halfmove_clock()),
                cxq: (config.rules == RuleSet::Cxq).then(|| (Identities::new(&start), cxq::CxqCounters::new(&start))),
                ended: terminal.map(|reason| (0, terminal_ruling(&start, reason, config.rules))),
            })
            .collect();
        Panel {
            position: start,
            undos: Vec::new(),
            hashes: vec![hash],
            repetitions: [(hash, Repetition::first(0))].into_iter().collect(),
            officials,
        }
    }

    /// The current position.
    pub fn position(&self) -> &Position {
        &self.position
    }

    /// Each rule set's first ruling with the ply after which it fell, in the order of
    /// the configurations given.
    pub fn ended(&self) -> impl Iterator<Item = Option<(usize, Ruling)>> + '_ {
        self.officials.iter().map(|official| official.ended)
    }

    /// Whether every rule set has ruled.
    pub fn all_ended(&self) -> bool {
        self.officials.iter().all(|official| official.ended.is_some())
    }

    /// Plays `mv`; a rule set that rules for the first time remembers the ruling.
    pub fn play(&mut self, mv: Move) -> Result<(), IllegalMove> {
        self.position.check_move(mv)?;
        let mover = self.position.side_to_move();
        let before = self.officials.iter().any(|o| o.cxq.is_some() && o.ended.is_none()).then(|| self.position.clone());
        let undo = self.position.make_move(mv);
        let hash = self.position.hash();
        self.undos.push(undo);
        self.hashes.push(hash);
        let ply = self.undos.len();
        let Panel { position, undos, repetitions, officials, .. } = self;
        let repetition = repetitions
            .entry(hash)
            .and_modify(|repetition| repetition.recur(ply, undos))
            .or_insert_with(|| Repetition::first(ply));
        let occurrences = repetition.count;
        let capture = undo.captured().is_some();
        let check = !capture && position.in_check();
        let pending = officials.iter().any(|o| o.ended.is_none());
        let terminal = if pending { terminal_reason(position) } else { None };
        let officials_count = officials.len();
        // The cycle's natures, classified once for every rule set that needs them.
        let mut natures: Option<Option<Vec<Nature>>> = None;
        // A rule set that has ruled counts nothing more: its first ruling stands.
        for (index, official) in officials.iter_mut().enumerate().filter(|(_, official)| official.ended.is_none()) {
            let config = official.config;
            official.natural.count(mover, capture, check, config.counted_checks);
            let cxq_ruling = match (&mut official.cxq, &before) {
                (Some((ids, counters)), Some(before)) => {
                    ids.apply(mv);
                    counters.record(before, position, mv, ids)
                }
                _ => None,
            };
            let ruling = match terminal {
                Some(reason) => Some(terminal_ruling(position, reason, config.rules)),
                None if official.cxq.is_some() => cxq_ruling,
                None => {
                    let judged = occurrences >= (WINDOW_OCCURRENCES as u32).min(config.draw_occurrences);
                    let cycle_ruling = if judged {
                        let natures = natures.get_or_insert_with(|| {
                            last_cycle(position, undos, repetition).map(|(start, moves)| cycle_natures(&start, &moves))
                        });
                        // A cycle leads back to its first position: its first mover is
                        // the side to move now.
                        natures.as_deref().map(|natures| rule_natures(position.side_to_move(), natures, config.rules))
                    } else {
                        None
                    };
                    let violation = cycle_ruling.filter(|ruling| ruling.reason.is_repetition_violation());
                    let shown = if judged {
                        repetition.count_violation(index, officials_count, violation.map(|ruling| ruling.outcome))
                    } else {
                        0
                    };
                    // The first window showing the violation is the warning's, and the
                    // loss falls as many occurrences later as the timing says.
                    let warned_for = config.violation_occurrences.saturating_sub(WINDOW_OCCURRENCES as u32 - 1);
                    cycle_ruling
                        .filter(|_| match violation {
                            Some(_) => shown >= warned_for,
                            None => occurrences >= config.draw_occurrences,
                        })
                        .or_else(|| official.natural_move_ruling())
                }
            };
            official.ended = ruling.map(|ruling| (ply, ruling));
        }
        Ok(())
    }
}

impl Official {
    fn natural_move_ruling(&self) -> Option<Ruling> {
        let limit = self.config.natural_move_plies?;
        (self.natural.counted_plies >= limit).then_some(Ruling {
            outcome: Outcome::Draw,
            reason: Reason::NaturalMoveCount,
            article: "WXF 8",
        })
    }
}

/// Occurrences of a position a window spans: the threefold repetition of WXF 17.3.G,
/// whose moves the arbiter judges.
const WINDOW_OCCURRENCES: usize = 3;

/// The repetition of the current position that `repetition` makes, if it occurred
/// before: the moves of its window, with their start position.
///
/// The window is the repetition being made, not the game's whole history of the
/// position: a perpetual check or chase that follows earlier, allowed visits to the
/// position is judged on its own cycles (17.3.G: "repeated consecutively"), while two
/// cycles alternating from one position (Diagram 80, two chariots chasing two cannons
/// in turn) are judged together ([`Repetition`]).
fn last_cycle(position: &Position, undos: &[Undo], repetition: &Repetition) -> Option<(Position, Vec<Move>)> {
    if repetition.count < 2 {
        return None;
    }
    let start_ply = repetition.window_start();
    let mut start = position.clone();
    for undo in undos[start_ply..].iter().rev() {
        start.unmake_move(*undo);
    }
    Some((start, undos[start_ply..].iter().map(|u| u.mv()).collect()))
}

/// Why the side to move in `position` has lost, if it has no legal move.
fn terminal_reason(position: &Position) -> Option<Reason> {
    if has_legal_move(position) {
        return None;
    }
    Some(if position.in_check() { Reason::Checkmate } else { Reason::Stalemate })
}

/// The ruling for a side to move in `position` left without a legal move, for `reason`.
fn terminal_ruling(position: &Position, reason: Reason, rules: RuleSet) -> Ruling {
    let article = match (reason, rules) {
        // The CXQ Basic Rules' "Endgame condition": "Checkmate: ... one wins";
        // "Stalemate: If one does not have any valid move, one loses".
        (Reason::Checkmate, RuleSet::Cxq) => "CXQ Basic Rules (checkmate)",
        (_, RuleSet::Cxq) => "CXQ Basic Rules (stalemate)",
        (Reason::Checkmate, _) => rules.article("WXF 3.1.A", "Asian Section 4 rule 1"),
        _ => rules.article("WXF 3.1.A", "Asian Section 4 rule 2"),
    };
    Ruling { outcome: Outcome::loss_of(position.side_to_move()), reason, article }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::xiangqi::movegen::legal_moves;
    use crate::xiangqi::rules::nature::classify;

    /// A random game that repeats itself: after a random opening, most moves take back
    /// the mover's previous move when they can, so cycles of checks, chases and idle
    /// moves close often.
    fn repeating_game(rng: &mut StdRng, plies: usize) -> (Position, Vec<Move>) {
        let start = Position::startpos();
        let opening = rng.random_range(0..100);
        let mut ids = Identities::new(&start);
        let mut position = start.clone();
        let mut moves: Vec<Move> = Vec::new();
        for ply in 0..plies {
            let legal = legal_moves(&position);
            if legal.is_empty() {
                break;
            }
            let back = (ply >= 2).then(|| moves[ply - 2]).map(|mv| Move::new(mv.to(), mv.from()));
            let mv = match back {
                Some(back) if ply >= opening && rng.random_bool(0.7) && legal.contains(&back) => back,
                // Checks, chases and captures, often: the natures of perpetuals, and
                // fewer pieces leave more of them unprotected.
                _ => {
                    let forcing: Vec<Move> = legal
                        .iter()
                        .copied()
                        .filter(|&mv| {
                            position.piece_at(mv.to()).is_some() || {
                                let nature = classify(&position, &ids, mv);
                                nature.check || !nature.chases.is_empty()
                            }
                        })
                        .collect();
                    match forcing.is_empty() || rng.random_bool(0.5) {
                        true => legal[rng.random_range(0..legal.len())],
                        false => forcing[rng.random_range(0..forcing.len())],
                    }
                }
            };
            ids.apply(mv);
            position.make_move(mv);
            moves.push(mv);
        }
        (start, moves)
    }

    #[test]
    fn a_panel_rules_each_rule_set_where_its_referee_alone_would() {
        let rule_sets = [RuleSet::Wxf, RuleSet::Asian, RuleSet::Cxq, RuleSet::Computer];
        let configs: Vec<RefereeConfig> = rule_sets.iter().map(|&rules| RefereeConfig::for_rules(rules)).collect();
        let mut rng = StdRng::seed_from_u64(18);
        let mut reasons = std::collections::BTreeMap::new();
        for _ in 0..1000 {
            let (start, moves) = repeating_game(&mut rng, 240);
            let mut panel = Panel::new(start.clone(), &configs);
            let mut alone: Vec<Referee> = configs.iter().map(|&config| Referee::new(start.clone(), config)).collect();
            for &mv in &moves {
                panel.play(mv).unwrap();
                for referee in &mut alone {
                    referee.play(mv).unwrap();
                }
                let apart: Vec<_> = alone.iter().map(Referee::ended).collect();
                assert_eq!(panel.ended().collect::<Vec<_>>(), apart, "after {mv} in {moves:?}");
            }
            for referee in &alone {
                let reason = referee.ruling().map(|r| r.reason.to_string());
                *reasons.entry((referee.rules().name(), reason)).or_insert(0) += 1;
            }
        }
        // The games reach the rulings a panel could get wrong by sharing its work.
        for (rules, reasons_wanted) in [
            ("wxf", &[Reason::PerpetualChase, Reason::PerpetualCheck, Reason::Repetition, Reason::Checkmate][..]),
            ("asian", &[Reason::PerpetualChase, Reason::PerpetualCheck, Reason::Repetition][..]),
            ("cxq", &[Reason::PerpetualChase, Reason::PerpetualCheck, Reason::CxqNoProgress][..]),
        ] {
            for reason in reasons_wanted {
                assert!(reasons.contains_key(&(rules, Some(reason.to_string()))), "{rules}, {reason}: {reasons:?}");
            }
        }
    }
}
