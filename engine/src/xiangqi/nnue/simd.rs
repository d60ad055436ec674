//! The network's three kernels, each with one portable scalar reference and x86-64
//! paths (SSE4.1, AVX2, AVX-512) chosen at run time by what the processor has.
//!
//! Every path computes exactly what the scalar one computes, bit for bit: sums wrap
//! as the vector instructions do, and the byte dot products cannot saturate because
//! their inputs are clipped activations in 0..=127 (two products of at most
//! 127 x 128 fit an `i16`). A test runs every path the machine has against the
//! scalar one on random inputs.

#[cfg(target_arch = "x86_64")]
mod x86;

/// Lengths every kernel's slices are multiples of: one AVX-512 register of `i16`.
pub const LANES_I16: usize = 32;
/// The multiple of an affine layer's input length.
pub const LANES_U8: usize = 32;

/// The instruction set the kernels run on. Only obtained from [`Simd::detect`],
/// [`Simd::available`] or [`Simd::by_name`], so a value always names a path the
/// processor supports; that is what makes the calls below safe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Simd(Path);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Sse41,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Simd {
    /// The portable path, always available.
    pub const SCALAR: Simd = Simd(Path::Scalar);

    /// Every path this processor supports, the scalar one first, the fastest last.
    pub fn available() -> Vec<Simd> {
        let mut paths = vec![Simd::SCALAR];
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("sse4.1") && is_x86_feature_detected!("ssse3") {
                paths.push(Simd(Path::Sse41));
            }
            if is_x86_feature_detected!("avx2") {
                paths.push(Simd(Path::Avx2));
            }
            if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                paths.push(Simd(Path::Avx512));
            }
        }
        paths
    }

    /// The fastest path this processor supports.
    pub fn detect() -> Simd {
        *Simd::available().last().expect("the scalar path is always available")
    }

    /// The path named `name` (`scalar`, `sse4.1`, `avx2`, `avx512`), if this
    /// processor supports it.
    pub fn by_name(name: &str) -> Option<Simd> {
        Simd::available().into_iter().find(|simd| simd.name() == name)
    }

    /// The path's name, as [`Simd::by_name`] reads it.
    pub fn name(self) -> &'static str {
        match self.0 {
            Path::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Path::Sse41 => "sse4.1",
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => "avx512",
        }
    }

    /// `dst = src + sum(adds) - sum(subs)`, lane by lane, wrapping. Every slice has
    /// the length of `dst`, a multiple of [`LANES_I16`].
    pub fn update(self, dst: &mut [i16], src: &[i16], adds: &[&[i16]], subs: &[&[i16]]) {
        let n = dst.len();
        assert!(n.is_multiple_of(LANES_I16) && src.len() == n, "accumulator length {n}");
        assert!(adds.iter().chain(subs).all(|row| row.len() == n), "weight rows of length {n}");
        match self.0 {
            Path::Scalar => scalar::update(dst, src, adds, subs),
            // SAFETY: the value proves the processor has the path's features (see
            // the type's docs); the lengths were checked above.
            #[cfg(target_arch = "x86_64")]
            Path::Sse41 => unsafe { x86::update_sse41(dst, src, adds, subs) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { x86::update_avx2(dst, src, adds, subs) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { x86::update_avx512(dst, src, adds, subs) },
        }
    }

    /// `out[i] = clamp(acc[i], 0, 127)`: the feature transformer's clipped ReLU.
    /// Both slices have the same length, a multiple of [`LANES_I16`].
    pub fn clipped_relu(self, acc: &[i16], out: &mut [u8]) {
        let n = acc.len();
        assert!(n.is_multiple_of(LANES_I16) && out.len() == n, "activation length {n}");
        match self.0 {
            Path::Scalar => scalar::clipped_relu(acc, out),
            // SAFETY: the value proves the processor has the path's features; the
            // lengths were checked above.
            #[cfg(target_arch = "x86_64")]
            Path::Sse41 => unsafe { x86::clipped_relu_sse41(acc, out) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { x86::clipped_relu_avx2(acc, out) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { x86::clipped_relu_avx512(acc, out) },
        }
    }

    /// A dense layer: `out[o] = biases[o] + sum_i input[i] * weights[o * n + i]`
    /// with `n = input.len()`, a multiple of [`LANES_U8`]. Inputs must lie in
    /// 0..=127 (they are clipped activations); larger ones may saturate on the
    /// vector paths.
    pub fn affine(self, input: &[u8], weights: &[i8], biases: &[i32], out: &mut [i32]) {
        let n = input.len();
        assert!(n.is_multiple_of(LANES_U8) && n > 0, "layer input length {n}");
        assert!(biases.len() == out.len() && weights.len() == n * out.len(), "layer of {n} x {}", out.len());
        match self.0 {
            Path::Scalar => scalar::affine(input, weights, biases, out),
            // SAFETY: the value proves the processor has the path's features; the
            // lengths were checked above.
            #[cfg(target_arch = "x86_64")]
            Path::Sse41 => unsafe { x86::affine_sse41(input, weights, biases, out) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx2 => unsafe { x86::affine_avx2(input, weights, biases, out) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Path::Avx512 => unsafe { x86::affine_avx512(input, weights, biases, out) },
        }
    }
}

/// The portable reference every other path is tested against.
mod scalar {
    pub(super) fn update(dst: &mut [i16], src: &[i16], adds: &[&[i16]], subs: &[&[i16]]) {
        for (i, value) in dst.iter_mut().enumerate() {
            let mut v = src[i];
            for row in adds {
                v = v.wrapping_add(row[i]);
            }
            for row in subs {
                v = v.wrapping_sub(row[i]);
            }
            *value = v;
        }
    }

    pub(super) fn clipped_relu(acc: &[i16], out: &mut [u8]) {
        for (o, &a) in out.iter_mut().zip(acc) {
            *o = a.clamp(0, 127) as u8;
        }
    }

    pub(super) fn affine(input: &[u8], weights: &[i8], biases: &[i32], out: &mut [i32]) {
        for (o, value) in out.iter_mut().enumerate() {
            let row = &weights[o * input.len()..(o + 1) * input.len()];
            *value =
                input.iter().zip(row).fold(biases[o], |sum, (&x, &w)| sum.wrapping_add(i32::from(x) * i32::from(w)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn random_i16s(rng: &mut StdRng, n: usize) -> Vec<i16> {
        (0..n).map(|_| rng.random()).collect()
    }

    #[test]
    fn every_path_updates_as_the_scalar_one() {
        let mut rng = StdRng::seed_from_u64(1);
        for round in 0..200 {
            let n = LANES_I16 * (1 + round % 9);
            let src = random_i16s(&mut rng, n);
            let rows: Vec<Vec<i16>> = (0..4).map(|_| random_i16s(&mut rng, n)).collect();
            let (adds, subs) = (round % 3, (round / 3) % 3);
            let add_rows: Vec<&[i16]> = rows[..adds].iter().map(Vec::as_slice).collect();
            let sub_rows: Vec<&[i16]> = rows[2..2 + subs.min(2)].iter().map(Vec::as_slice).collect();
            let mut expected = vec![0; n];
            Simd::SCALAR.update(&mut expected, &src, &add_rows, &sub_rows);
            for simd in Simd::available() {
                let mut got = vec![0; n];
                simd.update(&mut got, &src, &add_rows, &sub_rows);
                assert_eq!(got, expected, "{} update, round {round}", simd.name());
            }
        }
    }

    #[test]
    fn every_path_clips_as_the_scalar_one() {
        let mut rng = StdRng::seed_from_u64(2);
        for round in 0..200 {
            let n = LANES_I16 * (1 + round % 16);
            let acc = random_i16s(&mut rng, n);
            let mut expected = vec![0; n];
            Simd::SCALAR.clipped_relu(&acc, &mut expected);
            assert!(expected.contains(&0) && expected.contains(&127));
            for simd in Simd::available() {
                let mut got = vec![0xAA; n];
                simd.clipped_relu(&acc, &mut got);
                assert_eq!(got, expected, "{} clipped ReLU, round {round}", simd.name());
            }
        }
    }

    #[test]
    fn every_path_computes_layers_as_the_scalar_one() {
        let mut rng = StdRng::seed_from_u64(3);
        for round in 0..300 {
            let n = LANES_U8 * (1 + round % 17);
            let outputs = 1 + round % 33;
            let input: Vec<u8> = (0..n).map(|_| rng.random_range(0..=127)).collect();
            let weights: Vec<i8> = (0..n * outputs).map(|_| rng.random()).collect();
            let biases: Vec<i32> = (0..outputs).map(|_| rng.random_range(-1 << 20..1 << 20)).collect();
            let mut expected = vec![0; outputs];
            Simd::SCALAR.affine(&input, &weights, &biases, &mut expected);
            for simd in Simd::available() {
                let mut got = vec![0; outputs];
                simd.affine(&input, &weights, &biases, &mut got);
                assert_eq!(got, expected, "{} layer {n} x {outputs}, round {round}", simd.name());
            }
        }
    }

    #[test]
    fn extreme_weights_and_inputs_do_not_saturate() {
        let n = 64;
        let input = vec![127u8; n];
        for w in [i8::MIN, i8::MAX] {
            let weights = vec![w; n];
            for simd in Simd::available() {
                let mut out = [0];
                simd.affine(&input, &weights, &[0], &mut out);
                assert_eq!(out[0], 127 * i32::from(w) * n as i32, "{}", simd.name());
            }
        }
    }

    #[test]
    fn paths_are_found_by_name_and_the_scalar_one_always() {
        assert_eq!(Simd::by_name("scalar"), Some(Simd::SCALAR));
        assert_eq!(Simd::by_name("mmx"), None);
        for simd in Simd::available() {
            assert_eq!(Simd::by_name(simd.name()), Some(simd));
        }
    }
}
