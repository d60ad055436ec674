//! NNUE evaluation: an efficiently updatable neural network, the evaluation the search
//! uses when its options carry a net. The engine's binary plays with the net it embeds
//! ([`embedded`]) unless told otherwise (UCI options `EvalFile` and `UseNNUE`); without
//! a net the handcrafted evaluation ([`super::eval`]) stays.
//!
//! Architecture (named by [`ARCHITECTURE`], whose hash every net file carries):
//! - **Feature transformer:** 7,560 king-bucketed piece-on-point features per side
//!   ([`features`]) to [`L1`] `i16` values, one accumulator per side, kept up to date
//!   move by move: a quiet move subtracts one weight row and adds one, a capture
//!   subtracts one more, and only a king move refreshes its own side's view.
//! - **Clipped ReLU** to 0..=127 of both accumulators, the side to move's first:
//!   `2 x L1` bytes.
//! - **Two hidden layers** of [`L2`] and [`L3`] neurons with `i8` weights and `i32`
//!   biases; each sum is shifted right by [`WEIGHT_SHIFT`] and clipped to 0..=127.
//! - **Output:** one neuron, `i8` weights; the evaluation in centipawns is its sum
//!   divided by [`OUTPUT_DIVISOR`], from the side to move's view.
//!
//! Quantisation, for a trainer: activations 1.0 = 127; hidden and output weights
//! 1.0 = 64 (hence the shift); biases in the units of the sums they join. The
//! kernels ([`simd`]) have a scalar reference and SSE4.1, AVX2 and AVX-512 paths.
//! The file format is in [`format`].

pub mod embedded;
pub mod features;
pub mod format;
pub mod simd;

use features::{FEATURES, View};
use simd::Simd;

use super::{Move, Piece, PieceKind, Position, Undo};
use crate::color::{ByColor, Color};

/// Values of each side's accumulator.
pub const L1: usize = 256;
/// Neurons of the first hidden layer.
pub const L2: usize = 32;
/// Neurons of the second hidden layer.
pub const L3: usize = 32;
/// Hidden sums are shifted right by this before clipping (weights' 1.0 is 64).
pub const WEIGHT_SHIFT: u32 = 6;
/// The output sum per centipawn.
pub const OUTPUT_DIVISOR: i32 = 16;
/// The architecture's name; its FNV-1a hash is in every net file.
pub const ARCHITECTURE: &str = "xq-nnue-v1: halfka 6x14x90 -> 2x256 crelu -> 32 crelu -> 32 crelu -> 1";

/// A dense layer of `i8` weights, output-major (`weights[o * inputs + i]`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Layer {
    inputs: usize,
    biases: Vec<i32>,
    weights: Vec<i8>,
}

impl Layer {
    fn zeroed(inputs: usize, outputs: usize) -> Layer {
        Layer { inputs, biases: vec![0; outputs], weights: vec![0; inputs * outputs] }
    }

    fn outputs(&self) -> usize {
        self.biases.len()
    }
}

/// A loaded network.
#[derive(Clone, PartialEq, Eq)]
pub struct Network {
    description: String,
    transformer_biases: Vec<i16>,
    /// Feature-major: the row of feature `f` is `[f * L1, (f + 1) * L1)`.
    transformer_weights: Vec<i16>,
    hidden1: Layer,
    hidden2: Layer,
    output: Layer,
    simd: Simd,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network").field("description", &self.description).field("simd", &self.simd.name()).finish()
    }
}

/// Both sides' accumulators for one position, with the views they were built in.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub struct Accumulator {
    values: ByColor<[i16; L1]>,
    views: ByColor<View>,
}

/// A net's quantised parameters in the engine's layout, as a trainer produces them:
/// the feature transformer feature-major, the dense layers output-major (see
/// [`format`] for the order and the module docs for the scales).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parameters {
    /// [`L1`] values.
    pub transformer_biases: Vec<i16>,
    /// [`FEATURES`] x [`L1`] values, row `f` for feature `f`.
    pub transformer_weights: Vec<i16>,
    /// [`L2`] values.
    pub hidden1_biases: Vec<i32>,
    /// [`L2`] x 2 [`L1`] values, the side to move's half of each row first.
    pub hidden1_weights: Vec<i8>,
    /// [`L3`] values.
    pub hidden2_biases: Vec<i32>,
    /// [`L3`] x [`L2`] values.
    pub hidden2_weights: Vec<i8>,
    /// One value.
    pub output_bias: i32,
    /// [`L3`] values.
    pub output_weights: Vec<i8>,
}

/// Parameters whose shapes are not the architecture's.
#[derive(Debug, thiserror::Error)]
#[error("{name} has {found} values; the architecture ({ARCHITECTURE}) needs {expected}")]
pub struct ShapeError {
    /// The parameter.
    pub name: &'static str,
    /// Its length.
    pub found: usize,
    /// The architecture's.
    pub expected: usize,
}

impl Network {
    /// A net of `parameters`, checked against the architecture's shapes.
    pub fn from_parameters(description: String, parameters: Parameters) -> Result<Network, ShapeError> {
        let check = |name: &'static str, found: usize, expected: usize| {
            if found == expected { Ok(()) } else { Err(ShapeError { name, found, expected }) }
        };
        check("transformer_biases", parameters.transformer_biases.len(), L1)?;
        check("transformer_weights", parameters.transformer_weights.len(), FEATURES * L1)?;
        check("hidden1_biases", parameters.hidden1_biases.len(), L2)?;
        check("hidden1_weights", parameters.hidden1_weights.len(), L2 * 2 * L1)?;
        check("hidden2_biases", parameters.hidden2_biases.len(), L3)?;
        check("hidden2_weights", parameters.hidden2_weights.len(), L3 * L2)?;
        check("output_weights", parameters.output_weights.len(), L3)?;
        Ok(Network {
            description,
            transformer_biases: parameters.transformer_biases,
            transformer_weights: parameters.transformer_weights,
            hidden1: Layer { inputs: 2 * L1, biases: parameters.hidden1_biases, weights: parameters.hidden1_weights },
            hidden2: Layer { inputs: L2, biases: parameters.hidden2_biases, weights: parameters.hidden2_weights },
            output: Layer { inputs: L3, biases: vec![parameters.output_bias], weights: parameters.output_weights },
            simd: Simd::detect(),
        })
    }

    fn zeroed(description: String) -> Network {
        Network {
            description,
            transformer_biases: vec![0; L1],
            transformer_weights: vec![0; FEATURES * L1],
            hidden1: Layer::zeroed(2 * L1, L2),
            hidden2: Layer::zeroed(L2, L3),
            output: Layer::zeroed(L3, 1),
            simd: Simd::detect(),
        }
    }

    /// A network of pseudo-random weights drawn from `seed`, scaled so that its
    /// activations spread over their range: for testing the evaluation path and
    /// measuring its speed before a trained net exists.
    pub fn random(seed: u64) -> Network {
        let mut state = seed;
        let mut next = move |span: i32| -> i32 {
            let (new_state, value) = crate::splitmix::splitmix64(state);
            state = new_state;
            (value % (2 * span as u64 + 1)) as i32 - span
        };
        let mut network = Network::zeroed(format!("random network, seed {seed}"));
        network.transformer_biases.iter_mut().for_each(|b| *b = (next(32) + 32) as i16);
        network.transformer_weights.iter_mut().for_each(|w| *w = next(12) as i16);
        for layer in [&mut network.hidden1, &mut network.hidden2, &mut network.output] {
            layer.biases.iter_mut().for_each(|b| *b = next(2_000));
            layer.weights.iter_mut().for_each(|w| *w = next(48) as i8);
        }
        network
    }

    /// The net's integers, as [`Network::from_parameters`] takes them: what a trainer
    /// starts from when it continues training a net it has only as a file.
    pub fn parameters(&self) -> Parameters {
        Parameters {
            transformer_biases: self.transformer_biases.clone(),
            transformer_weights: self.transformer_weights.clone(),
            hidden1_biases: self.hidden1.biases.clone(),
            hidden1_weights: self.hidden1.weights.clone(),
            hidden2_biases: self.hidden2.biases.clone(),
            hidden2_weights: self.hidden2.weights.clone(),
            output_bias: self.output.biases[0],
            output_weights: self.output.weights.clone(),
        }
    }

    /// The description stored with the net (who trained it, on what).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// The kernels' instruction set.
    pub fn simd(&self) -> Simd {
        self.simd
    }

    /// The same net on the kernels of `simd`.
    pub fn with_simd(mut self, simd: Simd) -> Network {
        self.simd = simd;
        self
    }

    fn row(&self, feature: usize) -> &[i16] {
        &self.transformer_weights[feature * L1..(feature + 1) * L1]
    }

    /// Both accumulators of `position`, computed from its pieces.
    pub fn accumulator(&self, position: &Position) -> Accumulator {
        let views = ByColor::new_with(|color| View::of(position, color));
        let mut accumulator = Accumulator { values: ByColor { red: [0; L1], black: [0; L1] }, views };
        for color in Color::ALL {
            self.refresh(position, color, &mut accumulator);
        }
        accumulator
    }

    fn refresh(&self, position: &Position, color: Color, accumulator: &mut Accumulator) {
        accumulator.views[color] = View::of(position, color);
        let rows: Vec<&[i16]> = features::active(position, color).map(|f| self.row(f)).collect();
        self.simd.update(&mut accumulator.values[color], &self.transformer_biases, &rows, &[]);
    }

    /// `child`, the accumulators after `mv` (which moved `moved` and took
    /// `captured`) from the position of `parent`; `after` is the position it led to.
    pub fn update(
        &self,
        parent: &Accumulator,
        child: &mut Accumulator,
        after: &Position,
        mv: Move,
        moved: Piece,
        captured: Option<Piece>,
    ) {
        for color in Color::ALL {
            if moved == Piece::new(color, PieceKind::King) {
                self.refresh(after, color, child);
                continue;
            }
            let view = parent.views[color];
            child.views[color] = view;
            let added = [self.row(view.feature(moved, mv.to()))];
            let taken = captured.map(|piece| self.row(view.feature(piece, mv.to())));
            let removed = [self.row(view.feature(moved, mv.from())), taken.unwrap_or_default()];
            let removed = &removed[..1 + usize::from(taken.is_some())];
            self.simd.update(&mut child.values[color], &parent.values[color], &added, removed);
        }
    }

    /// The evaluation in centipawns from `side_to_move`'s view.
    pub fn evaluate(&self, accumulator: &Accumulator, side_to_move: Color) -> i32 {
        let mut input = [0u8; 2 * L1];
        let (ours, theirs) = input.split_at_mut(L1);
        self.simd.clipped_relu(&accumulator.values[side_to_move], ours);
        self.simd.clipped_relu(&accumulator.values[!side_to_move], theirs);
        let hidden1 = self.layer::<L2>(&self.hidden1, &input);
        let hidden2 = self.layer::<L3>(&self.hidden2, &hidden1);
        let mut output = [0];
        self.simd.affine(&hidden2, &self.output.weights, &self.output.biases, &mut output);
        output[0] / OUTPUT_DIVISOR
    }

    /// A hidden layer with its clipped ReLU.
    fn layer<const N: usize>(&self, layer: &Layer, input: &[u8]) -> [u8; N] {
        let mut sums = [0; N];
        self.simd.affine(input, &layer.weights, &layer.biases, &mut sums);
        sums.map(|s| (s >> WEIGHT_SHIFT).clamp(0, 127) as u8)
    }

    /// The evaluation of `position` from scratch, from its side to move's view.
    pub fn evaluate_position(&self, position: &Position) -> i32 {
        self.evaluate(&self.accumulator(position), position.side_to_move())
    }
}

/// The accumulators along a search path: one per position, the current one at
/// `depth`. Entries past it are kept so that the search never allocates.
#[derive(Clone, Debug)]
pub struct AccumulatorStack {
    network: std::sync::Arc<Network>,
    stack: Vec<Accumulator>,
    depth: usize,
}

impl AccumulatorStack {
    /// A stack holding `position`'s accumulators.
    pub fn new(network: std::sync::Arc<Network>, position: &Position) -> AccumulatorStack {
        let root = network.accumulator(position);
        AccumulatorStack { network, stack: vec![root], depth: 0 }
    }

    /// Follows the move `undo` takes back to `after`, the position it led to.
    pub fn push(&mut self, after: &Position, undo: &Undo) {
        let mv = undo.mv();
        let moved = after.piece_at(mv.to()).expect("the piece that moved");
        let (parent, child) = advance(&mut self.stack, &mut self.depth);
        self.network.update(parent, child, after, mv, moved, undo.captured());
    }

    /// Follows a null move: the pieces stay.
    pub fn push_null(&mut self) {
        let (parent, child) = advance(&mut self.stack, &mut self.depth);
        child.clone_from(parent);
    }

    /// Goes back one position.
    pub fn pop(&mut self) {
        debug_assert!(self.depth > 0, "the root stays");
        self.depth -= 1;
    }

    fn current(&self) -> &Accumulator {
        &self.stack[self.depth]
    }

    /// The current position's evaluation from `side_to_move`'s view.
    pub fn evaluate(&self, side_to_move: Color) -> i32 {
        self.network.evaluate(self.current(), side_to_move)
    }
}

/// Makes the entry above `depth` the current one; returns its parent and it.
fn advance<'a>(stack: &'a mut Vec<Accumulator>, depth: &mut usize) -> (&'a Accumulator, &'a mut Accumulator) {
    if *depth + 1 == stack.len() {
        stack.push(stack[*depth].clone());
    }
    *depth += 1;
    let (head, tail) = stack.split_at_mut(*depth);
    (&head[*depth - 1], &mut tail[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xiangqi::movegen::legal_moves;

    #[test]
    fn a_random_net_evaluates_alike_on_every_path_and_colour_flipped() {
        let network = Network::random(7);
        let fen = "r2akab1r/3n5/4b3n/p1p1pRp1p/9/2P3P2/P3P3c/N2C3C1/4A4/1RBAK1B2 w";
        let position = Position::from_fen(fen).unwrap();
        let expected = network.clone().with_simd(Simd::SCALAR).evaluate_position(&position);
        for simd in Simd::available() {
            let network = network.clone().with_simd(simd);
            assert_eq!(network.evaluate_position(&position), expected, "{}", simd.name());
            assert_eq!(network.evaluate_position(&position.color_flipped()), expected, "{}", simd.name());
        }
    }

    #[test]
    fn parameters_of_the_wrong_shape_are_refused_by_name() {
        let parameters = Parameters {
            transformer_biases: vec![0; L1],
            transformer_weights: vec![0; FEATURES * L1],
            hidden1_biases: vec![0; L2],
            hidden1_weights: vec![0; L2 * 2 * L1],
            hidden2_biases: vec![0; L3],
            hidden2_weights: vec![0; L3 * L2 - 1],
            output_bias: -100,
            output_weights: vec![0; L3],
        };
        let error = Network::from_parameters("short".into(), parameters.clone()).unwrap_err();
        assert_eq!((error.name, error.found, error.expected), ("hidden2_weights", L3 * L2 - 1, L3 * L2));
        let mut fixed = parameters;
        fixed.hidden2_weights.push(0);
        let network = Network::from_parameters("zero".into(), fixed).unwrap();
        // Every weight is zero, so the output is its bias over the divisor, truncated
        // toward zero as integer division does (-6, not -7).
        assert_eq!(network.evaluate_position(&Position::startpos()), -6);
    }

    #[test]
    fn a_nets_parameters_rebuild_the_same_net() {
        let network = Network::random(5);
        let rebuilt = Network::from_parameters(network.description().to_owned(), network.parameters()).unwrap();
        assert_eq!(rebuilt.to_bytes(), network.to_bytes());
    }

    #[test]
    fn random_nets_spread_their_evaluations() {
        let network = Network::random(11);
        let mut position = Position::startpos();
        let mut seen = std::collections::BTreeSet::new();
        for mv in legal_moves(&position).iter().copied().collect::<Vec<_>>() {
            let undo = position.make_move(mv);
            seen.insert(network.evaluate_position(&position));
            position.unmake_move(undo);
        }
        assert!(seen.len() > 10, "a random net should not be constant: {seen:?}");
    }

    #[test]
    fn incremental_updates_match_a_refresh_along_random_games() {
        let network = std::sync::Arc::new(Network::random(3));
        let mut state = 99u64;
        for _game in 0..20 {
            let mut position = Position::startpos();
            let mut stack = AccumulatorStack::new(network.clone(), &position);
            for _ply in 0..150 {
                let moves = legal_moves(&position);
                if moves.is_empty() {
                    break;
                }
                let (next, r) = crate::splitmix::splitmix64(state);
                state = next;
                let mv = moves[(r % moves.len() as u64) as usize];
                let undo = position.make_move(mv);
                stack.push(&position, &undo);
                let fresh = network.accumulator(&position);
                let top = stack.current();
                assert_eq!(top.values, fresh.values, "after {mv} in {}", crate::xiangqi::fen::to_fen(&position));
                assert_eq!(top.views, fresh.views);
                assert_eq!(stack.evaluate(position.side_to_move()), network.evaluate_position(&position));
            }
        }
    }
}
