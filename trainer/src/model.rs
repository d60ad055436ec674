//! The engine's net in float ([`xq_engine::xiangqi::nnue`]): 7,560 features per side
//! to 2 x 256 clipped ReLU, 32, 32, 1, and its quantisation to the engine's integers.
//!
//! The feature transformer is sparse: each view adds the weight rows of its active
//! features (at most 32 of 7,560), forward and backward, so no dense 7,560-wide
//! product is ever formed; on the CPU in [`transformer`]'s kernel, elsewhere through
//! libtorch's `embedding_bag` in sum mode ([`sparse_sum`]).
//!
//! Scales, from the engine's quantisation: an activation's 1.0 is 127, a hidden or
//! output weight's 1.0 is 64, so the engine's output sum is `64 x 127 = 8,128` times
//! the float output and its evaluation `8,128 / 16 = 508` times it, in centipawns
//! ([`CENTIPAWNS_PER_UNIT`]). [`Model::forward`] returns centipawns.
//!
//! Clipping keeps every quantised value in range: feature-transformer weights and
//! biases within [`TRANSFORMER_LIMIT`], so that a bias and 32 rows sum to at most
//! 32,767 in `i16`; hidden and output weights within 127 / 64, the `i8` range.
//!
//! A factorised model ([`Model::factorised`]) trains one more tensor, the factor
//! ([`FACTOR`]): a row per piece slot and point whatever the king's bucket, added to
//! that slot and point's row in every bucket. The transformer's weights are then the
//! sum, and each bucket's rows learn from the positions of every bucket through the
//! factor. The sum is what the engine gets: the factor exists in training only, and
//! [`Model::composed`] (which quantisation and export go through) folds it in.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tch::{Device, Kind, Tensor};
use xq_engine::xiangqi::nnue::features::{FEATURES, KING_BUCKETS, PIECE_SLOTS, POINTS};
use xq_engine::xiangqi::nnue::{L1, L2, L3, OUTPUT_DIVISOR, Parameters, WEIGHT_SHIFT};

use crate::data::{Batch, MAX_FEATURES};
use crate::transformer::{self, ACTIVATION_ONE, Transformed};

/// A hidden or output weight's 1.0 in the engine.
pub const WEIGHT_ONE: f64 = (1 << WEIGHT_SHIFT) as f64;
/// The engine's evaluation per unit of float output.
pub const CENTIPAWNS_PER_UNIT: f64 = WEIGHT_ONE * ACTIVATION_ONE / OUTPUT_DIVISOR as f64;
/// The largest feature-transformer weight or bias: a bias and [`MAX_FEATURES`] rows
/// of this size sum to no more than `i16::MAX` once quantised (rounding included).
pub const TRANSFORMER_LIMIT: f64 = (i16::MAX as f64 / (MAX_FEATURES as f64 + 1.0) - 0.5) / ACTIVATION_ONE;
/// The largest hidden or output weight: `i8::MAX` once quantised.
pub const WEIGHT_LIMIT: f64 = i8::MAX as f64 / WEIGHT_ONE;

/// The model's parameters by name, in the order the checkpoint and export use.
pub const NAMES: [&str; 8] =
    ["ft.weight", "ft.bias", "h1.weight", "h1.bias", "h2.weight", "h2.bias", "out.weight", "out.bias"];

/// The factor's name: a factorised model's parameter after those of [`NAMES`].
pub const FACTOR: &str = "ft.factor";

/// The factor's rows: a feature's bucket dropped, its piece slot on its point. A
/// feature's index is `bucket x FACTOR_FEATURES + slot x POINTS + point`, so its
/// factor row is its index modulo this.
pub const FACTOR_FEATURES: usize = PIECE_SLOTS * POINTS;

/// The float net.
#[derive(Debug)]
pub struct Model {
    /// The parameters, in [`NAMES`] order, then the factor when the model is factorised.
    pub tensors: Vec<Tensor>,
}

/// A batch's tensors on the model's device.
#[derive(Debug)]
pub struct BatchTensors {
    features: Features,
    /// Search scores, centipawns.
    pub scores: Tensor,
    /// Game results from the side to move's view.
    pub results: Tensor,
}

impl BatchTensors {
    /// `batch` on `device`.
    pub fn of(batch: &Batch, device: Device) -> BatchTensors {
        let features = if device == Device::Cpu {
            Features::Cpu(batch.clone())
        } else {
            Features::Device {
                ours: Tensor::from_slice(&batch.ours).to_device(device),
                theirs: Tensor::from_slice(&batch.theirs).to_device(device),
                offsets: Tensor::from_slice(&batch.offsets).to_device(device),
            }
        };
        BatchTensors {
            features,
            scores: Tensor::from_slice(&batch.scores).to_device(device),
            results: Tensor::from_slice(&batch.results).to_device(device),
        }
    }
}

/// A batch's features where the feature transformer reads them.
#[derive(Debug)]
enum Features {
    /// The batch itself, for the transformer's CPU kernel.
    Cpu(Batch),
    /// Index tensors on the device, for libtorch's path.
    Device { ours: Tensor, theirs: Tensor, offsets: Tensor },
}

/// A forward pass: the output, and the CPU transformer's state for the backward.
#[derive(Debug)]
pub struct Forward {
    /// The evaluations in centipawns.
    pub output: Tensor,
    transformed: Option<(Tensor, Transformed)>,
}

/// A quantised value out of its integer range.
#[derive(Debug, thiserror::Error)]
#[error("layer {layer} does not fit the engine's integers: a value quantises to {value}, beyond {limit}")]
pub struct OverflowError {
    /// The parameter.
    pub layer: &'static str,
    /// The first value out of range.
    pub value: f64,
    /// The range's bound.
    pub limit: f64,
}

/// The parameters' shapes, in [`NAMES`] order.
fn shapes() -> [Vec<i64>; 8] {
    let (features, l1, l2, l3) = (FEATURES as i64, L1 as i64, L2 as i64, L3 as i64);
    [vec![features, l1], vec![l1], vec![l2, 2 * l1], vec![l2], vec![l3, l2], vec![l3], vec![1, l3], vec![1]]
}

/// The factor's shape.
fn factor_shape() -> [i64; 2] {
    [FACTOR_FEATURES as i64, L1 as i64]
}

/// Whether `name` is one of a model's parameters (factorised or not).
pub fn is_parameter(name: &str) -> bool {
    NAMES.contains(&name) || name == FACTOR
}

impl Model {
    /// A freshly initialised model on `device`, drawn from `seed` alone (not from
    /// libtorch's global generator, which other threads may be using).
    pub fn new(device: Device, seed: u64) -> Model {
        let mut rng = StdRng::seed_from_u64(seed);
        // A view's ~32 rows of uniform(-a, a) sum to a spread of about 0.5 around the
        // 0.5 bias, the middle of the clipped ReLU's range.
        let transformer = 1.0 / (MAX_FEATURES as f32).sqrt() / 2.0;
        let dense = |fan_in: usize| 1.0 / (fan_in as f32).sqrt();
        let tensors = shapes()
            .iter()
            .zip(NAMES)
            .map(|(shape, name)| {
                let count = shape.iter().product::<i64>() as usize;
                let mut uniform = |a: f32| (0..count).map(|_| rng.random_range(-a..=a)).collect::<Vec<f32>>();
                let values = match name {
                    "ft.weight" => uniform(transformer),
                    "ft.bias" => vec![0.5; count],
                    "h1.weight" | "h1.bias" => uniform(dense(2 * L1)),
                    "h2.weight" | "h2.bias" => uniform(dense(L2)),
                    _ => uniform(dense(L3)),
                };
                Tensor::from_slice(&values).reshape(shape.as_slice()).to_device(device).set_requires_grad(true)
            })
            .collect();
        Model { tensors }
    }

    /// A model of `tensors` (named as in [`NAMES`], and [`FACTOR`] for a factorised
    /// model), checked against the shapes.
    pub fn from_named(mut named: Vec<(String, Tensor)>, device: Device) -> Result<Model, String> {
        let factorised = named.iter().any(|(name, _)| name == FACTOR);
        let expected = NAMES.into_iter().zip(shapes()).chain(factorised.then(|| (FACTOR, factor_shape().to_vec())));
        let mut tensors = Vec::new();
        for (name, shape) in expected {
            let at = named.iter().position(|(n, _)| n == name).ok_or(format!("no tensor {name}"))?;
            let tensor = named.swap_remove(at).1;
            if tensor.size() != shape {
                return Err(format!("{name} has shape {:?}, not {shape:?}", tensor.size()));
            }
            tensors.push(tensor.to_kind(Kind::Float).to_device(device).detach().set_requires_grad(true));
        }
        Ok(Model { tensors })
    }

    /// This model factorised: with a factor of zeros added when it has none, so that
    /// it starts as the same net (a model read from a net file or an unfactorised
    /// checkpoint goes on from where it was).
    pub fn factorised(mut self) -> Model {
        if !self.is_factorised() {
            let factor = Tensor::zeros(factor_shape(), (Kind::Float, self.device()));
            self.tensors.push(factor.set_requires_grad(true));
        }
        self
    }

    /// Whether the model has a factor.
    pub fn is_factorised(&self) -> bool {
        self.tensors.len() > NAMES.len()
    }

    /// The same net without a factor: the factor's rows added to every bucket's. The
    /// tensors are copies, so training either model leaves the other alone.
    pub fn composed(&self) -> Model {
        let copy = |t: &Tensor| t.detach().copy().set_requires_grad(true);
        let mut tensors: Vec<Tensor> = self.tensors[..NAMES.len()].iter().map(copy).collect();
        tensors[0] = copy(&self.transformer_weights());
        Model { tensors }
    }

    /// The feature transformer's weights: the real rows, plus the factor's row in
    /// every bucket when there is one (through autograd, for libtorch's path).
    fn transformer_weights(&self) -> Tensor {
        match self.tensors.get(NAMES.len()) {
            Some(factor) => &self.tensors[0] + factor.repeat([KING_BUCKETS as i64, 1]),
            None => self.tensors[0].shallow_clone(),
        }
    }

    /// The float model whose quantisation is `parameters` (a net the trainer has only
    /// as a file, such as the engine's embedded one): each integer over its scale, the
    /// hidden biases without the half step [`Model::quantise`] adds, so that quantising
    /// the model gives `parameters` back exactly.
    pub fn from_parameters(parameters: &Parameters, device: Device) -> Model {
        let sum = WEIGHT_ONE * ACTIVATION_ONE;
        let rounding = f64::from(1 << (WEIGHT_SHIFT - 1));
        let scaled = |values: Vec<f64>, scale: f64| values.into_iter().map(|v| (v / scale) as f32).collect::<Vec<_>>();
        let from = |values: &[i16]| values.iter().map(|&v| f64::from(v)).collect::<Vec<_>>();
        let from_i8 = |values: &[i8]| values.iter().map(|&v| f64::from(v)).collect::<Vec<_>>();
        let biases = |values: &[i32]| values.iter().map(|&v| f64::from(v) - rounding).collect::<Vec<_>>();
        let values = [
            scaled(from(&parameters.transformer_weights), ACTIVATION_ONE),
            scaled(from(&parameters.transformer_biases), ACTIVATION_ONE),
            scaled(from_i8(&parameters.hidden1_weights), WEIGHT_ONE),
            scaled(biases(&parameters.hidden1_biases), sum),
            scaled(from_i8(&parameters.hidden2_weights), WEIGHT_ONE),
            scaled(biases(&parameters.hidden2_biases), sum),
            scaled(from_i8(&parameters.output_weights), WEIGHT_ONE),
            scaled(vec![f64::from(parameters.output_bias)], sum),
        ];
        let tensors = values
            .iter()
            .zip(shapes())
            .map(|(values, shape)| {
                Tensor::from_slice(values).reshape(shape.as_slice()).to_device(device).set_requires_grad(true)
            })
            .collect();
        Model { tensors }
    }

    /// The parameters with their names (the factor's last, when there is one).
    pub fn named(&self) -> impl Iterator<Item = (&'static str, &Tensor)> {
        NAMES.into_iter().chain([FACTOR]).zip(&self.tensors)
    }

    /// Which parameters take weight decay: the weights, and the factor. Decaying the
    /// real rows and the factor alike decays their sum, the net's weights, exactly as
    /// an unfactorised model's are.
    pub fn decayed(&self) -> Vec<bool> {
        self.named().map(|(name, _)| name.ends_with("weight") || name == FACTOR).collect()
    }

    /// The predicted evaluation in centipawns from the side to move's view.
    ///
    /// Quantisation-aware: the dense layers' weights and biases and every activation
    /// pass through their quantised values (rounded to the engine's steps), with the
    /// gradient of the unrounded value (a straight-through estimator). Rounding the
    /// engine's coarse steps (an output weight's step is worth 8 cp) otherwise leaves
    /// a trained net tens of centipawns away from its float self.
    ///
    /// On the CPU the feature transformer runs in [`transformer`]'s kernel, outside
    /// autograd; [`Model::gradients`] then adds its gradients.
    pub fn forward(&self, batch: &BatchTensors) -> Forward {
        let [_, ft_b, h1_w, h1_b, h2_w, h2_b, out_w, out_b] = &self.tensors[..NAMES.len()] else {
            unreachable!("eight")
        };
        let ft_w = &self.transformer_weights();
        let sum = WEIGHT_ONE * ACTIVATION_ONE;
        let activation = |x: Tensor| rounded(&x.clamp(0.0, 1.0), ACTIVATION_ONE);
        let (input, transformed) = match &batch.features {
            Features::Cpu(cpu) => {
                let values = |t: &Tensor| Vec::<f32>::try_from(t.detach().flatten(0, -1)).expect("float parameters");
                let mut transformed = transformer::forward(&values(ft_w), &values(ft_b), cpu);
                let input = Tensor::from_slice(&transformed.input).reshape([cpu.len() as i64, 2 * L1 as i64]);
                transformer::recycle(std::mem::take(&mut transformed.input));
                let input = input.set_requires_grad(true);
                (input.shallow_clone(), Some((input, transformed)))
            }
            Features::Device { ours, theirs, offsets } => {
                let view = |indices: &Tensor| activation(sparse_sum(ft_w, indices, offsets) + ft_b);
                (Tensor::cat(&[view(ours), view(theirs)], 1), None)
            }
        };
        let layer = |x: &Tensor, w: &Tensor, b: &Tensor| x.linear(&rounded(w, WEIGHT_ONE), Some(&rounded(b, sum)));
        let hidden1 = activation(layer(&input, h1_w, h1_b));
        let hidden2 = activation(layer(&hidden1, h2_w, h2_b));
        Forward { output: layer(&hidden2, out_w, out_b).squeeze_dim(1) * CENTIPAWNS_PER_UNIT, transformed }
    }

    /// The parameters' gradients (in the order of [`Model::tensors`]) once a loss of
    /// `forward`'s output has gone backward.
    pub fn gradients(&self, forward: &Forward, batch: &BatchTensors) -> Vec<Tensor> {
        let mut gradients: Vec<Tensor> = self.tensors.iter().map(Tensor::grad).collect();
        if let (Some((input, transformed)), Features::Cpu(cpu)) = (&forward.transformed, &batch.features) {
            let mut upstream = transformer::buffer(transformed.passes.len());
            input.grad().copy_data(&mut upstream, transformed.passes.len());
            let (weights, biases) = transformer::backward(transformed, cpu, &upstream);
            gradients[0] = Tensor::from_slice(&weights).reshape([FEATURES as i64, L1 as i64]).to_device(self.device());
            gradients[1] = Tensor::from_slice(&biases).to_device(self.device());
            if self.is_factorised() {
                // A factor row is in every bucket's sum: its gradient is theirs, summed.
                let by_bucket = gradients[0].view([KING_BUCKETS as i64, FACTOR_FEATURES as i64, L1 as i64]);
                gradients[NAMES.len()] = by_bucket.sum_dim_intlist(0, false, Kind::Float);
            }
            transformer::recycle(upstream);
            transformer::recycle(weights);
        }
        gradients
    }

    /// Clears the gradients autograd left on the parameters.
    pub fn zero_grad(&mut self) {
        for tensor in &mut self.tensors {
            let mut gradient = tensor.grad();
            if gradient.defined() {
                let _ = gradient.zero_();
            }
        }
    }

    fn device(&self) -> Device {
        self.tensors[0].device()
    }

    /// Clips every parameter into the range its quantisation holds.
    ///
    /// In a factorised model the sums are quantised, so they are what is clipped:
    /// the factor within the limit on its own, then each real row moved by as much as
    /// its sum with the factor lies beyond the limit. The forward pass thus computes
    /// the very weights the engine gets (no clipping at composition, whose gradient
    /// would be either zero or not the forward's); an unfactorised model's clip is the
    /// same with a factor of zero; and clipping the factor too bounds how far a pair
    /// can drift apart (the factor climbing while its rows fall, their sum held at the
    /// limit).
    pub fn clip(&mut self) {
        let factorised = self.is_factorised();
        tch::no_grad(|| {
            for (name, tensor) in NAMES.iter().chain([&FACTOR]).zip(self.tensors.iter_mut()) {
                let limit = limit_of(name);
                if limit.is_finite() && !(factorised && *name == NAMES[0]) {
                    let _ = tensor.clamp_(-limit, limit);
                }
            }
            if factorised && let [weights, .., factor] = &mut self.tensors[..] {
                let by_bucket = weights.view([KING_BUCKETS as i64, FACTOR_FEATURES as i64, L1 as i64]);
                let sums = &by_bucket + factor.unsqueeze(0);
                // Zero wherever the sum is within the limit, so those rows stay exactly as they are.
                let excess = &sums - sums.clamp(-TRANSFORMER_LIMIT, TRANSFORMER_LIMIT);
                let _ = weights.g_sub_(&excess.view([FEATURES as i64, L1 as i64]));
            }
        });
    }

    /// The engine's integers for this model (a factorised model's composed), or the
    /// first layer that overflows them.
    pub fn quantise(&self) -> Result<Parameters, OverflowError> {
        if self.is_factorised() {
            return self.composed().quantise();
        }
        let values = |index: usize, scale: f64| -> Vec<f64> {
            let tensor = (&self.tensors[index] * scale).round().to_kind(Kind::Double).to_device(Device::Cpu);
            Vec::<f64>::try_from(tensor.flatten(0, -1)).expect("a float tensor converts")
        };
        let checked = |index: usize, scale: f64, limit: f64| -> Result<Vec<f64>, OverflowError> {
            let values = values(index, scale);
            match values.iter().find(|v| v.abs() > limit) {
                Some(&value) => Err(OverflowError { layer: NAMES[index], value, limit }),
                None => Ok(values),
            }
        };
        let sum = WEIGHT_ONE * ACTIVATION_ONE;
        let i16s = |v: Vec<f64>| v.into_iter().map(|x| x as i16).collect::<Vec<_>>();
        let i8s = |v: Vec<f64>| v.into_iter().map(|x| x as i8).collect::<Vec<_>>();
        let i32s = |v: Vec<f64>| v.into_iter().map(|x| x as i32).collect::<Vec<_>>();
        let transformer_biases = checked(1, ACTIVATION_ONE, f64::from(i16::MAX))?;
        let transformer_weights = checked(0, ACTIVATION_ONE, f64::from(i16::MAX))?;
        // Whatever the position, a bias and 32 rows must add up within i16.
        for neuron in 0..L1 {
            let largest = (0..FEATURES).map(|f| transformer_weights[f * L1 + neuron].abs()).fold(0.0, f64::max);
            let bound = transformer_biases[neuron].abs() + MAX_FEATURES as f64 * largest;
            if bound > f64::from(i16::MAX) {
                return Err(OverflowError { layer: NAMES[0], value: bound, limit: f64::from(i16::MAX) });
            }
        }
        let i32_limit = f64::from(i32::MAX) / 4.0;
        // The engine shifts hidden sums right, a floor; half a step added to the
        // biases makes it a rounding, so the quantised net does not run low.
        let rounding = f64::from(1 << (WEIGHT_SHIFT - 1));
        let hidden_biases = |index: usize| -> Result<Vec<i32>, OverflowError> {
            Ok(i32s(checked(index, sum, i32_limit)?.into_iter().map(|b| b + rounding).collect()))
        };
        Ok(Parameters {
            transformer_biases: i16s(transformer_biases),
            transformer_weights: i16s(transformer_weights),
            hidden1_biases: hidden_biases(3)?,
            hidden1_weights: i8s(checked(2, WEIGHT_ONE, 127.0)?),
            hidden2_biases: hidden_biases(5)?,
            hidden2_weights: i8s(checked(4, WEIGHT_ONE, 127.0)?),
            output_bias: i32s(checked(7, sum, i32_limit)?)[0],
            output_weights: i8s(checked(6, WEIGHT_ONE, 127.0)?),
        })
    }
}

/// The sums of `weights`' rows named by `indices`, one sum per sample (`offsets`
/// gives where each sample's indices start): the feature transformer's sparse
/// product, forward and backward, without a dense row per sample.
pub fn sparse_sum(weights: &Tensor, indices: &Tensor, offsets: &Tensor) -> Tensor {
    const SUM: i64 = 0;
    let (sums, _, _, _) = Tensor::embedding_bag(weights, indices, offsets, false, SUM, false, None::<Tensor>, false);
    sums
}

/// `x` rounded to steps of `1 / scale` going forward, `x` itself going backward.
fn rounded(x: &Tensor, scale: f64) -> Tensor {
    let steps = (x * scale).round() / scale;
    x + (steps - x).detach()
}

/// How far a parameter may go either way.
fn limit_of(name: &str) -> f64 {
    match name {
        "ft.weight" | "ft.bias" | FACTOR => TRANSFORMER_LIMIT,
        "h1.weight" | "h2.weight" | "out.weight" => WEIGHT_LIMIT,
        _ => f64::INFINITY,
    }
}

/// The engine's evaluation of each position of `batch` under the quantised
/// `parameters`, in the engine's integer arithmetic: accumulators clipped to 0..=127,
/// hidden sums shifted right (a floor) and clipped, the output divided by 16 with
/// truncation. Values are carried in doubles, exact for these integers.
pub fn quantised_forward(parameters: &Parameters, batch: &Batch) -> Vec<i32> {
    let doubles = |values: Vec<f64>, shape: &[i64]| Tensor::from_slice(&values).reshape(shape);
    let ft_w =
        doubles(parameters.transformer_weights.iter().map(|&v| f64::from(v)).collect(), &[FEATURES as i64, L1 as i64]);
    let ft_b = doubles(parameters.transformer_biases.iter().map(|&v| f64::from(v)).collect(), &[L1 as i64]);
    let dense = |weights: &[i8], biases: &[i32], outputs: usize| {
        let w = doubles(weights.iter().map(|&v| f64::from(v)).collect(), &[outputs as i64, -1]);
        let b = doubles(biases.iter().map(|&v| f64::from(v)).collect(), &[outputs as i64]);
        (w, b)
    };
    let (h1_w, h1_b) = dense(&parameters.hidden1_weights, &parameters.hidden1_biases, L2);
    let (h2_w, h2_b) = dense(&parameters.hidden2_weights, &parameters.hidden2_biases, L3);
    let (out_w, out_b) = dense(&parameters.output_weights, &[parameters.output_bias], 1);
    let offsets = Tensor::from_slice(&batch.offsets);
    let view = |indices: &[i64]| {
        (sparse_sum(&ft_w, &Tensor::from_slice(indices), &offsets) + &ft_b).clamp(0.0, ACTIVATION_ONE)
    };
    let input = Tensor::cat(&[view(&batch.ours), view(&batch.theirs)], 1);
    let layer = |x: &Tensor, w: &Tensor, b: &Tensor| {
        x.linear(w, Some(b)).divide_scalar_mode(WEIGHT_ONE, "floor").clamp(0.0, ACTIVATION_ONE)
    };
    let hidden2 = layer(&layer(&input, &h1_w, &h1_b), &h2_w, &h2_b);
    let output = hidden2.linear(&out_w, Some(&out_b)).divide_scalar_mode(f64::from(OUTPUT_DIVISOR), "trunc");
    Vec::<f64>::try_from(output.flatten(0, -1))
        .expect("a double tensor converts")
        .into_iter()
        .map(|v| v as i32)
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::transformer::tests::batch;
    use crate::transformer::{backward, forward};

    #[test]
    fn a_net_read_into_the_model_quantises_back_to_itself() {
        let net = xq_engine::xiangqi::nnue::embedded::embedded();
        let model = Model::from_parameters(&net.parameters(), Device::Cpu);
        assert!(model.quantise().unwrap() == net.parameters(), "the embedded net's integers, exactly");
        let factorised = model.factorised();
        assert!(factorised.is_factorised());
        assert!(factorised.quantise().unwrap() == net.parameters(), "a factor starts at zero");
    }

    #[test]
    fn a_features_factor_row_is_its_piece_on_its_point_whatever_the_kings_bucket() {
        use xq_engine::color::Color;
        use xq_engine::xiangqi::nnue::features::View;
        use xq_engine::xiangqi::{Piece, PieceKind, Position, Square};
        // The red king on e0 and on e1: two buckets of Red's view, one board otherwise.
        let low = Position::from_fen("3k5/9/9/9/9/9/9/9/9/R3K4 w").unwrap();
        let high = Position::from_fen("3k5/9/9/9/9/9/9/9/4K4/R8 w").unwrap();
        let (low, high) = (View::of(&low, Color::Red), View::of(&high, Color::Red));
        let a0 = Square::parse_with_label("a0", 0).unwrap();
        for piece in [Piece::new(Color::Red, PieceKind::Rook), Piece::new(Color::Black, PieceKind::Rook)] {
            let (low, high) = (low.feature(piece, a0), high.feature(piece, a0));
            assert_ne!(low / FACTOR_FEATURES, high / FACTOR_FEATURES, "two buckets");
            assert_eq!(low % FACTOR_FEATURES, high % FACTOR_FEATURES, "one factor row");
        }
        assert_eq!(FEATURES, KING_BUCKETS * FACTOR_FEATURES);
    }

    /// A factorised model with a factor of random values, and the unfactorised model
    /// of its sums, composed here row by row.
    /// A factorised model and the same model with its factor summed into its rows.
    pub(crate) fn factorised_and_summed(seed: u64) -> (Model, Model) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut model = Model::new(Device::Cpu, seed).factorised();
        let factor: Vec<f32> = (0..FACTOR_FEATURES * L1).map(|_| rng.random_range(-0.05..0.05)).collect();
        tch::no_grad(|| model.tensors[NAMES.len()].copy_(&Tensor::from_slice(&factor).reshape(factor_shape())));
        let mut weights = Vec::<f32>::try_from(model.tensors[0].detach().flatten(0, -1)).unwrap();
        for (feature, row) in weights.chunks_exact_mut(L1).enumerate() {
            let factor_row = &factor[feature % FACTOR_FEATURES * L1..][..L1];
            row.iter_mut().zip(factor_row).for_each(|(w, f)| *w += f);
        }
        let mut named: Vec<(String, Tensor)> =
            model.named().take(NAMES.len()).map(|(name, t)| (name.to_owned(), t.detach().copy())).collect();
        named[0].1 = Tensor::from_slice(&weights).reshape([FEATURES as i64, L1 as i64]);
        let summed = Model::from_named(named, Device::Cpu).unwrap();
        (model, summed)
    }

    /// `batch`'s tensors for libtorch's path, on the CPU (where the model would take its own kernel).
    fn through_libtorch(batch: &Batch) -> BatchTensors {
        let BatchTensors { scores, results, .. } = BatchTensors::of(batch, Device::Cpu);
        let features = Features::Device {
            ours: Tensor::from_slice(&batch.ours),
            theirs: Tensor::from_slice(&batch.theirs),
            offsets: Tensor::from_slice(&batch.offsets),
        };
        BatchTensors { features, scores, results }
    }

    fn values(tensor: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(tensor.detach().flatten(0, -1)).unwrap()
    }

    #[test]
    fn a_factorised_model_evaluates_as_the_model_of_its_summed_weights() {
        let (factorised, summed) = factorised_and_summed(4);
        let batch = crate::transformer::tests::batch(200, &mut StdRng::seed_from_u64(5));
        let tensors = BatchTensors::of(&batch, Device::Cpu);
        let output = |model: &Model, tensors: &BatchTensors| tch::no_grad(|| values(&model.forward(tensors).output));
        assert_eq!(output(&factorised, &tensors), output(&summed, &tensors), "the CPU kernel, exactly");
        let without = Model::from_named(
            factorised.named().take(NAMES.len()).map(|(n, t)| (n.to_owned(), t.detach().copy())).collect(),
            Device::Cpu,
        )
        .unwrap();
        assert_ne!(output(&factorised, &tensors), output(&without, &tensors), "the factor counts");
        let libtorch = output(&factorised, &through_libtorch(&batch));
        let worst = output(&summed, &tensors).iter().zip(&libtorch).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 2.0, "libtorch's path differs by up to {worst} cp");
    }

    #[test]
    fn the_factors_gradient_is_its_rows_gradients_summed_over_the_buckets() {
        let (mut model, _) = factorised_and_summed(6);
        let mut rng = StdRng::seed_from_u64(7);
        let batch = crate::transformer::tests::batch(300, &mut rng);
        let upstream: Vec<f32> = (0..batch.len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut gradients = |tensors: &BatchTensors| {
            let forward = model.forward(tensors);
            (&forward.output * Tensor::from_slice(&upstream)).sum(Kind::Float).backward();
            let gradients: Vec<Vec<f32>> = model.gradients(&forward, tensors).iter().map(values).collect();
            model.zero_grad();
            gradients
        };
        // libtorch's autograd through the tiled factor, and the CPU kernel's bucket sum.
        let reference = gradients(&through_libtorch(&batch));
        let kernel = gradients(&BatchTensors::of(&batch, Device::Cpu));
        let (weights, factor) = (&reference[0], &reference[NAMES.len()]);
        let mut bucket_sum = vec![0f32; FACTOR_FEATURES * L1];
        for (i, w) in weights.iter().enumerate() {
            bucket_sum[i % (FACTOR_FEATURES * L1)] += w;
        }
        let largest = |values: &[f32]| values.iter().fold(0f32, |m, g| m.max(g.abs()));
        let worst = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(largest(factor) > 0.0, "the factor learns");
        let difference = worst(factor, &bucket_sum);
        assert!(difference <= 1e-5 * largest(factor), "autograd's factor gradient is the bucket sum: {difference}");
        for (i, name) in NAMES.into_iter().chain([FACTOR]).enumerate() {
            let (worst, largest) = (worst(&kernel[i], &reference[i]), largest(&reference[i]));
            assert!(worst <= 1e-3 * largest, "{name}: the kernel's gradient differs by up to {worst} of {largest}");
        }
    }

    #[test]
    fn clipping_a_factorised_model_clips_the_sums_the_engine_gets() {
        let (mut model, _) = factorised_and_summed(9);
        let limit = TRANSFORMER_LIMIT as f32;
        tch::no_grad(|| {
            // Feature 0's first weight: 0.8 and 0.7 of the limit, summing beyond it; the
            // factor's second value beyond the limit on its own.
            let _ = model.tensors[0].get(0).get(0).fill_(0.8 * f64::from(limit));
            let _ = model.tensors[NAMES.len()].get(0).get(0).fill_(0.7 * f64::from(limit));
            let _ = model.tensors[NAMES.len()].get(0).get(1).fill_(3.0 * f64::from(limit));
        });
        let before = values(&model.tensors[0]);
        model.clip();
        let (weights, factor) = (values(&model.tensors[0]), values(&model.tensors[NAMES.len()]));
        let sums = values(&model.composed().tensors[0]);
        assert!(sums.iter().all(|s| s.abs() <= limit * (1.0 + 1e-6)), "every sum within the limit");
        assert!((sums[0] - limit).abs() <= limit * 1e-6, "a sum beyond the limit clipped to it: {}", sums[0]);
        assert!((factor[0] - 0.7 * limit).abs() < 1e-6, "the factor within the limit is kept");
        assert_eq!(factor[1], limit, "the factor beyond the limit is clipped");
        let moved = weights.iter().zip(&before).filter(|(a, b)| a != b).count();
        assert!(moved <= KING_BUCKETS * 2, "only the rows whose sums went beyond moved: {moved}");
        assert!(model.quantise().is_ok());
    }

    #[test]
    fn the_sparse_sum_and_its_gradient_equal_a_dense_product() {
        tch::manual_seed(3);
        let weights = Tensor::randn([FEATURES as i64, 8], (Kind::Double, Device::Cpu)).set_requires_grad(true);
        // Three samples of 3, 0 and 4 features; feature 7 twice in the last.
        let indices = [5i64, 900, 7_559, 7, 7, 42, 3_000];
        let offsets = Tensor::from_slice(&[0i64, 3, 3]);
        let upstream = Tensor::randn([3, 8], (Kind::Double, Device::Cpu));
        let sparse = sparse_sum(&weights, &Tensor::from_slice(&indices), &offsets);
        (&sparse * &upstream).sum(Kind::Double).backward();
        let sparse_gradient = weights.grad().copy();

        let dense_weights = weights.detach().copy().set_requires_grad(true);
        let mut one_hot = vec![0f64; 3 * FEATURES];
        for (sample, range) in [(0, 0..3), (2, 3..7)] {
            for &feature in &indices[range] {
                one_hot[sample * FEATURES + feature as usize] += 1.0;
            }
        }
        let one_hot = Tensor::from_slice(&one_hot).reshape([3, FEATURES as i64]);
        let dense = one_hot.matmul(&dense_weights);
        (&dense * &upstream).sum(Kind::Double).backward();

        assert!(f64::try_from((&sparse - &dense).abs().max()).unwrap() < 1e-12, "forward");
        let difference = (&sparse_gradient - dense_weights.grad()).abs().max();
        assert!(f64::try_from(difference).unwrap() < 1e-12, "gradient");
        assert!(f64::try_from(sparse_gradient.abs().sum(Kind::Double)).unwrap() > 0.0);
    }

    #[test]
    fn clipping_keeps_every_quantised_value_in_range_and_overflow_names_the_layer() {
        let mut model = Model::new(Device::Cpu, 1);
        tch::no_grad(|| {
            let _ = model.tensors[0].g_mul_scalar_(1_000.0);
            let _ = model.tensors[4].g_mul_scalar_(1_000.0);
        });
        let error = model.quantise().unwrap_err();
        assert_eq!(error.layer, "ft.weight", "{error}");
        model.clip();
        let parameters = model.quantise().expect("a clipped model quantises");
        assert!(parameters.hidden2_weights.iter().any(|&w| w == 127 || w == -127), "the clip reached the i8 bound");
        let bound = parameters.transformer_weights.iter().map(|w| i32::from(*w).abs()).max().unwrap();
        assert!(33 * bound <= i32::from(i16::MAX), "a bias and 32 rows fit i16: {bound}");
    }

    #[test]
    fn the_kernel_matches_libtorch_forward_and_backward() {
        let mut rng = StdRng::seed_from_u64(9);
        let batch = batch(300, &mut rng);
        // Weights that put the sums on both sides of the clipping range.
        let weights: Vec<f32> = (0..FEATURES * L1).map(|_| rng.random_range(-0.3..0.3)).collect();
        let biases: Vec<f32> = (0..L1).map(|_| rng.random_range(-0.5..1.5)).collect();
        let upstream: Vec<f32> = (0..batch.len() * 2 * L1).map(|_| rng.random_range(-1.0..1.0)).collect();

        let transformed = forward(&weights, &biases, &batch);
        let (weight_gradient, bias_gradient) = backward(&transformed, &batch, &upstream);

        // The same through libtorch's embedding bag and autograd, with the
        // straight-through rounding the model's other layers use.
        let w = Tensor::from_slice(&weights).reshape([FEATURES as i64, L1 as i64]).set_requires_grad(true);
        let b = Tensor::from_slice(&biases).set_requires_grad(true);
        let offsets = Tensor::from_slice(&batch.offsets);
        let view = |indices: &[i64]| {
            let x = (sparse_sum(&w, &Tensor::from_slice(indices), &offsets) + &b).clamp(0.0, 1.0);
            &x + ((&x * 127.0).round() / 127.0 - &x).detach()
        };
        let reference = Tensor::cat(&[view(&batch.ours), view(&batch.theirs)], 1);
        let upstream_tensor = Tensor::from_slice(&upstream).reshape([batch.len() as i64, 2 * L1 as i64]);
        (&reference * &upstream_tensor).sum(Kind::Float).backward();

        let reference = Vec::<f32>::try_from(reference.detach().flatten(0, -1)).unwrap();
        let differing = transformed.input.iter().zip(&reference).filter(|(a, b)| (*a - *b).abs() > 1e-6).count();
        // Summing in another order may move a sum across a rounding tie.
        assert!(differing <= 3, "{differing} activations differ");
        let passed = transformed.passes.iter().filter(|&&p| p == 1).count();
        assert!(passed > 1_000 && passed < transformed.passes.len() - 1_000, "both clipping sides: {passed}");

        let close = |ours: &[f32], theirs: &Tensor, what: &str| {
            let theirs = Vec::<f32>::try_from(theirs.flatten(0, -1).to_device(Device::Cpu)).unwrap();
            let worst = ours.iter().zip(&theirs).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(worst < 1e-3, "{what} gradient differs by up to {worst}");
            assert!(theirs.iter().any(|&g| g != 0.0), "{what} gradient is not all zero");
        };
        close(&weight_gradient, &w.grad(), "weight");
        close(&bias_gradient, &b.grad(), "bias");
    }
}
