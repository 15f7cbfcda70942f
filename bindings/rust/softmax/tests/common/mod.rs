// SPDX-License-Identifier: Apache-2.0
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

/// The stored dtype of a result, for the tolerance.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    F32,
    F16,
    Bf16,
    F64,
}

impl Kind {
    /// Unit roundoff of the storage type.
    pub fn storage(self) -> f64 {
        match self {
            Kind::F64 => 2f64.powi(-53),
            Kind::F32 => 2f64.powi(-24),
            Kind::F16 => 2f64.powi(-11),
            Kind::Bf16 => 2f64.powi(-8),
        }
    }
    /// The smallest subnormal step: a value below it may be stored as zero or as that step.
    pub fn floor(self) -> f64 {
        match self {
            Kind::F64 => 2f64.powi(-1074),
            Kind::F32 => 2f64.powi(-149),
            Kind::F16 => 2f64.powi(-24),
            Kind::Bf16 => 2f64.powi(-133),
        }
    }
}

/// The library's arithmetic error for a row of `cols` elements: fp64 when any array is f64.
pub fn arithmetic(cols: usize, fp64: bool) -> f64 {
    (if fp64 { 1e-14 } else { 1e-6 }) * (1.0 + ((cols as f64) + 1.0).log2() / 8.0)
}

/// Absolute tolerance for an output stored as `kind` whose exact value is `want`: the C++
/// suites' formula (tests/common/reference.h).
pub fn tolerance_with(kind: Kind, want: f64, log: bool, cols: usize, fp64: bool) -> f64 {
    let arith = arithmetic(cols, fp64);
    want.abs() * (kind.storage() + arith)
        + if log {
            arith * (1.0 + want.abs())
        } else {
            kind.floor()
        }
}

/// [`tolerance_with`] for fp32 arithmetic, or fp64 when the result is f64.
pub fn tolerance(kind: Kind, want: f64, log: bool, cols: usize) -> f64 {
    tolerance_with(kind, want, log, cols, matches!(kind, Kind::F64))
}

/// got against the float64 want, element by element: NaN must be NaN, an infinity or an exact
/// zero must be hit exactly, anything else must lie within tol(i).
pub fn assert_within(got: &[f64], want: &[f64], cols: usize, tol: impl Fn(usize) -> f64) {
    assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want.iter()).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || w == 0.0 {
            g == w
        } else {
            (g - w).abs() <= tol(i)
        };
        assert!(
            ok,
            "element {} (row {}, col {}): got {:e}, want {:e}, tolerance {:e}",
            i,
            i / cols.max(1),
            i % cols.max(1),
            g,
            w,
            tol(i)
        );
    }
}

pub fn assert_close(kind: Kind, got: &[f64], want: &[f64], cols: usize, log: bool) {
    assert_within(got, want, cols, |i| tolerance(kind, want[i], log, cols));
}

/// The softmax gradient per row in float64, from the forward's output y.
pub fn reference_backward(y: &[f64], dy: &[f64], rows: usize, cols: usize, log: bool) -> Vec<f64> {
    let mut dx = vec![0.0f64; rows * cols];
    for r in 0..rows {
        let (yr, dr) = (&y[r * cols..(r + 1) * cols], &dy[r * cols..(r + 1) * cols]);
        let s: f64 = if log {
            dr.iter().sum()
        } else {
            dr.iter().zip(yr).map(|(d, v)| d * v).sum()
        };
        for c in 0..cols {
            dx[r * cols + c] = if log {
                dr[c] - yr[c].exp() * s
            } else {
                yr[c] * (dr[c] - s)
            };
        }
    }
    dx
}

/// Tolerance of each gradient element stored as `kind`, computed from the stored y and dy: the
/// arithmetic error scales with the terms added (|y| (|dy| + sum |dy y|), or
/// |dy| + exp(y) sum |dy| for log-softmax), plus the rounding of the stored result.
pub fn backward_tolerances(
    kind: Kind,
    y: &[f64],
    dy: &[f64],
    rows: usize,
    cols: usize,
    log: bool,
    fp64: bool,
) -> Vec<f64> {
    let arith = arithmetic(cols, fp64);
    let want = reference_backward(y, dy, rows, cols, log);
    let mut tol = vec![0.0f64; rows * cols];
    for r in 0..rows {
        let (yr, dr) = (&y[r * cols..(r + 1) * cols], &dy[r * cols..(r + 1) * cols]);
        let sum: f64 = if log {
            dr.iter().map(|d| d.abs()).sum()
        } else {
            dr.iter().zip(yr).map(|(d, v)| (d * v).abs()).sum()
        };
        for c in 0..cols {
            let i = r * cols + c;
            let terms = if log {
                dr[c].abs() + yr[c].exp() * sum
            } else {
                yr[c].abs() * (dr[c].abs() + sum)
            };
            tol[i] = terms * arith + want[i].abs() * kind.storage() + kind.floor();
        }
    }
    tol
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
