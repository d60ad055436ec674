//! The x86-64 vector paths of the kernels in [`super`]. Each function may only be
//! called when the processor has the features it is compiled for, and with the
//! lengths [`super::Simd`] checks: every `i16` slice a multiple of 32 lanes and
//! every layer input a multiple of 32 bytes.

use std::arch::x86_64::*;

#[target_feature(enable = "ssse3,sse4.1")]
pub(super) fn update_sse41(dst: &mut [i16], src: &[i16], adds: &[&[i16]], subs: &[&[i16]]) {
    for c in (0..dst.len()).step_by(8) {
        // SAFETY: every slice holds dst.len() lanes, a multiple of 8, so lanes
        // c..c + 8 are in bounds; unaligned loads and stores accept any address.
        unsafe {
            let mut v = _mm_loadu_si128(src.as_ptr().add(c).cast());
            for row in adds {
                v = _mm_add_epi16(v, _mm_loadu_si128(row.as_ptr().add(c).cast()));
            }
            for row in subs {
                v = _mm_sub_epi16(v, _mm_loadu_si128(row.as_ptr().add(c).cast()));
            }
            _mm_storeu_si128(dst.as_mut_ptr().add(c).cast(), v);
        }
    }
}

#[target_feature(enable = "avx2")]
pub(super) fn update_avx2(dst: &mut [i16], src: &[i16], adds: &[&[i16]], subs: &[&[i16]]) {
    for c in (0..dst.len()).step_by(16) {
        // SAFETY: every slice holds dst.len() lanes, a multiple of 16, so lanes
        // c..c + 16 are in bounds; unaligned loads and stores accept any address.
        unsafe {
            let mut v = _mm256_loadu_si256(src.as_ptr().add(c).cast());
            for row in adds {
                v = _mm256_add_epi16(v, _mm256_loadu_si256(row.as_ptr().add(c).cast()));
            }
            for row in subs {
                v = _mm256_sub_epi16(v, _mm256_loadu_si256(row.as_ptr().add(c).cast()));
            }
            _mm256_storeu_si256(dst.as_mut_ptr().add(c).cast(), v);
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
pub(super) fn update_avx512(dst: &mut [i16], src: &[i16], adds: &[&[i16]], subs: &[&[i16]]) {
    for c in (0..dst.len()).step_by(32) {
        // SAFETY: every slice holds dst.len() lanes, a multiple of 32, so lanes
        // c..c + 32 are in bounds; unaligned loads and stores accept any address.
        unsafe {
            let mut v = _mm512_loadu_si512(src.as_ptr().add(c).cast());
            for row in adds {
                v = _mm512_add_epi16(v, _mm512_loadu_si512(row.as_ptr().add(c).cast()));
            }
            for row in subs {
                v = _mm512_sub_epi16(v, _mm512_loadu_si512(row.as_ptr().add(c).cast()));
            }
            _mm512_storeu_si512(dst.as_mut_ptr().add(c).cast(), v);
        }
    }
}

#[target_feature(enable = "ssse3,sse4.1")]
pub(super) fn clipped_relu_sse41(acc: &[i16], out: &mut [u8]) {
    let (zero, top) = (_mm_setzero_si128(), _mm_set1_epi16(127));
    for c in (0..acc.len()).step_by(16) {
        // SAFETY: both slices hold acc.len() lanes, a multiple of 16, so lanes
        // c..c + 16 are in bounds; unaligned loads and stores accept any address.
        unsafe {
            let low = _mm_loadu_si128(acc.as_ptr().add(c).cast());
            let high = _mm_loadu_si128(acc.as_ptr().add(c + 8).cast());
            let low = _mm_min_epi16(_mm_max_epi16(low, zero), top);
            let high = _mm_min_epi16(_mm_max_epi16(high, zero), top);
            _mm_storeu_si128(out.as_mut_ptr().add(c).cast(), _mm_packus_epi16(low, high));
        }
    }
}

#[target_feature(enable = "avx2")]
pub(super) fn clipped_relu_avx2(acc: &[i16], out: &mut [u8]) {
    let (zero, top) = (_mm256_setzero_si256(), _mm256_set1_epi16(127));
    for c in (0..acc.len()).step_by(32) {
        // SAFETY: both slices hold acc.len() lanes, a multiple of 32, so lanes
        // c..c + 32 are in bounds; unaligned loads and stores accept any address.
        unsafe {
            let low = _mm256_loadu_si256(acc.as_ptr().add(c).cast());
            let high = _mm256_loadu_si256(acc.as_ptr().add(c + 16).cast());
            let low = _mm256_min_epi16(_mm256_max_epi16(low, zero), top);
            let high = _mm256_min_epi16(_mm256_max_epi16(high, zero), top);
            // The pack works within 128-bit halves; the permutation puts the four
            // quarters back in order.
            let packed = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi16(low, high));
            _mm256_storeu_si256(out.as_mut_ptr().add(c).cast(), packed);
        }
    }
}

#[target_feature(enable = "avx512f,avx512bw")]
pub(super) fn clipped_relu_avx512(acc: &[i16], out: &mut [u8]) {
    let (zero, top) = (_mm512_setzero_si512(), _mm512_set1_epi16(127));
    for c in (0..acc.len()).step_by(32) {
        // SAFETY: both slices hold acc.len() lanes, a multiple of 32, so lanes
        // c..c + 32 are in bounds; unaligned loads and stores accept any address.
        unsafe {
            let v = _mm512_loadu_si512(acc.as_ptr().add(c).cast());
            let v = _mm512_min_epi16(_mm512_max_epi16(v, zero), top);
            _mm256_storeu_si256(out.as_mut_ptr().add(c).cast(), _mm512_cvtepi16_epi8(v));
        }
    }
}

#[target_feature(enable = "ssse3,sse4.1")]
fn horizontal_sum_128(v: __m128i) -> i32 {
    let v = _mm_add_epi32(v, _mm_shuffle_epi32::<0b01_00_11_10>(v));
    let v = _mm_add_epi32(v, _mm_shuffle_epi32::<0b10_11_00_01>(v));
    _mm_cvtsi128_si32(v)
}

#[target_feature(enable = "avx2")]
fn horizontal_sum_256(v: __m256i) -> i32 {
    horizontal_sum_128(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v)))
}

#[target_feature(enable = "ssse3,sse4.1")]
pub(super) fn affine_sse41(input: &[u8], weights: &[i8], biases: &[i32], out: &mut [i32]) {
    let n = input.len();
    let ones = _mm_set1_epi16(1);
    for (o, value) in out.iter_mut().enumerate() {
        let mut sum = _mm_setzero_si128();
        for c in (0..n).step_by(16) {
            // SAFETY: the input holds n bytes and the weights n per output, n a
            // multiple of 16, so bytes c..c + 16 of both are in bounds.
            let (x, w) = unsafe {
                (_mm_loadu_si128(input.as_ptr().add(c).cast()), _mm_loadu_si128(weights.as_ptr().add(o * n + c).cast()))
            };
            sum = _mm_add_epi32(sum, _mm_madd_epi16(_mm_maddubs_epi16(x, w), ones));
        }
        *value = biases[o].wrapping_add(horizontal_sum_128(sum));
    }
}

#[target_feature(enable = "avx2")]
pub(super) fn affine_avx2(input: &[u8], weights: &[i8], biases: &[i32], out: &mut [i32]) {
    let n = input.len();
    let ones = _mm256_set1_epi16(1);
    for (o, value) in out.iter_mut().enumerate() {
        let mut sum = _mm256_setzero_si256();
        for c in (0..n).step_by(32) {
            // SAFETY: the input holds n bytes and the weights n per output, n a
            // multiple of 32, so bytes c..c + 32 of both are in bounds.
            let (x, w) = unsafe {
                (
                    _mm256_loadu_si256(input.as_ptr().add(c).cast()),
                    _mm256_loadu_si256(weights.as_ptr().add(o * n + c).cast()),
                )
            };
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), ones));
        }
        *value = biases[o].wrapping_add(horizontal_sum_256(sum));
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx2")]
pub(super) fn affine_avx512(input: &[u8], weights: &[i8], biases: &[i32], out: &mut [i32]) {
    let n = input.len();
    let wide = n - n % 64;
    let ones = _mm512_set1_epi16(1);
    for (o, value) in out.iter_mut().enumerate() {
        let mut sum = _mm512_setzero_si512();
        for c in (0..wide).step_by(64) {
            // SAFETY: c + 64 <= wide <= n, and the weights hold n bytes per output.
            let (x, w) = unsafe {
                (
                    _mm512_loadu_si512(input.as_ptr().add(c).cast()),
                    _mm512_loadu_si512(weights.as_ptr().add(o * n + c).cast()),
                )
            };
            sum = _mm512_add_epi32(sum, _mm512_madd_epi16(_mm512_maddubs_epi16(x, w), ones));
        }
        let mut total = _mm512_reduce_add_epi32(sum);
        if wide < n {
            // The last 32 bytes of an input that is an odd multiple of 32.
            // SAFETY: n - wide == 32, so bytes wide..n are in bounds of both.
            let (x, w) = unsafe {
                (
                    _mm256_loadu_si256(input.as_ptr().add(wide).cast()),
                    _mm256_loadu_si256(weights.as_ptr().add(o * n + wide).cast()),
                )
            };
            let tail = _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), _mm256_set1_epi16(1));
            total = total.wrapping_add(horizontal_sum_256(tail));
        }
        *value = biases[o].wrapping_add(total);
    }
}
