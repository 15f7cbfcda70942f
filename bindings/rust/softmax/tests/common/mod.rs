//! Test helpers: a seeded generator, the float64 reference, the tolerance used by the C++ suites
//! (tests/common/reference.h), and fp16/bf16 bit conversions (round to nearest even) so that the
//! tests can build half-precision inputs. None of this is part of the crate's API.
#![allow(dead_code)]

use softmax::{Bf16, F16};

/// splitmix64: a small, well-mixed generator.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator with a seed that differs from run to run, so every run sees fresh inputs.
    /// The seed is printed (libtest shows it when the test fails); SOFTMAX_TEST_SEED repeats it.
    pub fn fresh() -> Rng {
        let seed = match std::env::var("SOFTMAX_TEST_SEED") {
            Ok(s) => s.parse::<u64>().expect("SOFTMAX_TEST_SEED must be a u64"),
            Err(_) => {
                let mut bytes = [0u8; 8];
                use std::io::Read;
                std::fs::File::open("/dev/urandom")
                    .and_then(|mut f| f.read_exact(&mut bytes))
                    .expect("reading /dev/urandom");
                u64::from_le_bytes(bytes)
            }
        };
        println!(
            "random inputs from seed {} (SOFTMAX_TEST_SEED={} repeats them)",
            seed, seed
        );
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// Row-wise softmax (or log-softmax) in float64.
pub fn reference(x: &[f64], rows: usize, cols: usize, log: bool) -> Vec<f64> {
    let mut y = vec![0.0f64; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|v| (v - m).exp()).sum();
        for c in 0..cols {
            y[r * cols + c] = if log {
                row[c] - m - s.ln()
            } else {
                (row[c] - m).exp() / s
            };
        }
    }
    y
}

/// Bits of mantissa the stored dtype keeps, for the tolerance.
#[derive(Clone, Copy)]
pub enum Kind {
    F32,
    F16,
    Bf16,
}

/// Absolute tolerance for an output whose exact value is `want`: the C++ suites' formula, plus
/// fp16's subnormal spacing (2^-24), since small probabilities stored in fp16 lose relative
/// precision there (bf16 and fp32 share fp32's exponent range, so theirs is negligible).
pub fn tolerance(kind: Kind, want: f64, log: bool, cols: usize) -> f64 {
    let (storage, floor) = match kind {
        Kind::F32 => (2f64.powi(-24), 0.0),
        Kind::F16 => (2f64.powi(-11), 2f64.powi(-24)),
        Kind::Bf16 => (2f64.powi(-8), 0.0),
    };
    let arith = 1e-6 * (1.0 + ((cols as f64) + 1.0).log2() / 8.0);
    want.abs() * (storage + arith)
        + floor
        + if log {
            arith * (1.0 + want.abs())
        } else {
            1e-30
        }
}

pub fn assert_close(kind: Kind, got: &[f64], want: &[f64], cols: usize, log: bool) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
        let tol = tolerance(kind, w, log, cols);
        assert!(
            (g - w).abs() <= tol,
            "element {} (row {}, col {}): got {:e}, want {:e}, tolerance {:e}",
            i,
            i / cols,
            i % cols,
            g,
            w,
            tol
        );
    }
}

fn round_half_even(v: f64) -> f64 {
    let f = v.floor();
    let d = v - f;
    if d > 0.5 || (d == 0.5 && f % 2.0 != 0.0) {
        f + 1.0
    } else {
        f
    }
}

pub fn f32_to_f16(x: f32) -> F16 {
    if x.is_nan() {
        return F16(0x7e00);
    }
    let sign: u16 = if x.is_sign_negative() { 0x8000 } else { 0 };
    let a = x.abs() as f64;
    if a >= 65520.0 {
        return F16(sign | 0x7c00); // rounds to infinity
    }
    if a < 2f64.powi(-14) {
        // Subnormal (or zero): multiples of 2^-24; 1024 rounds up into the smallest normal.
        return F16(sign | round_half_even(a * 2f64.powi(24)) as u16);
    }
    let mut e = ((x.abs().to_bits() >> 23) & 0xff) as i32 - 127;
    let mut q = round_half_even((a / 2f64.powi(e) - 1.0) * 1024.0) as u16;
    if q == 1024 {
        e += 1;
        q = 0;
    }
    F16(sign | (((e + 15) as u16) << 10) | q)
}

pub fn f16_to_f32(h: F16) -> f32 {
    let h = h.0;
    let negative = h & 0x8000 != 0;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let v = if exp == 0 {
        man as f32 * 2f32.powi(-24)
    } else if exp == 31 {
        f32::from_bits(0x7f80_0000 | (man << 13))
    } else {
        f32::from_bits(((exp + 112) << 23) | (man << 13))
    };
    if negative {
        -v
    } else {
        v
    }
}

pub fn f32_to_bf16(x: f32) -> Bf16 {
    if x.is_nan() {
        return Bf16(0x7fc0);
    }
    let b = x.to_bits();
    let lsb = (b >> 16) & 1;
    Bf16((b.wrapping_add(0x7fff + lsb) >> 16) as u16)
}

pub fn bf16_to_f32(h: Bf16) -> f32 {
    f32::from_bits((h.0 as u32) << 16)
}
