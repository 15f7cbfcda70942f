// SPDX-License-Identifier: Apache-2.0
//! softmax::rows against the float64 reference on fresh random inputs, for every dtype, with
//! poisoned outputs so that an unwritten element cannot pass. Inputs are fresh each run (the
//! seed is printed on failure) and drawn from [-8, 8], as in the C++ suites.

mod common;

use common::{assert_close, reference, Kind, Rng};
use softmax::{Bf16, Options, F16};

const SHAPES: &[(usize, usize)] = &[(1, 1), (3, 7), (17, 1000), (2, 40_000), (257, 33)];

#[test]
fn f32_matches_reference() {
    let mut rng = Rng::fresh();
    for &log in &[false, true] {
        for &(rows, cols) in SHAPES {
            let x = rng.vec(rows * cols, -8.0, 8.0);
            let mut y = vec![f32::NAN; rows * cols];
            softmax::rows(&x, &mut y, rows, cols, &Options::default().log(log)).unwrap();
            let want = reference(
                &x.iter().map(|&v| v as f64).collect::<Vec<_>>(),
                rows,
                cols,
                log,
            );
            let got: Vec<f64> = y.iter().map(|&v| v as f64).collect();
            assert_close(Kind::F32, &got, &want, cols, log);
        }
    }
}

#[test]
fn f32_in_place_matches_out_of_place() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (33, 513);
    let x = rng.vec(rows * cols, -8.0, 8.0);
    let mut y = vec![f32::NAN; rows * cols];
    softmax::rows(&x, &mut y, rows, cols, &Options::default()).unwrap();
    let mut xy = x.clone();
    softmax::rows_in_place(&mut xy, rows, cols, &Options::default()).unwrap();
    let want = reference(
        &x.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        rows,
        cols,
        false,
    );
    let got: Vec<f64> = xy.iter().map(|&v| v as f64).collect();
    assert_close(Kind::F32, &got, &want, cols, false);
}

#[test]
fn f16_matches_reference() {
    let mut rng = Rng::fresh();
    for &log in &[false, true] {
        for &(rows, cols) in SHAPES {
            let x: Vec<F16> = rng
                .vec(rows * cols, -8.0, 8.0)
                .into_iter()
                .map(common::f32_to_f16)
                .collect();
            let mut y = vec![F16(0x7e00); rows * cols]; // NaN poison
            softmax::rows(&x, &mut y, rows, cols, &Options::default().log(log)).unwrap();
            let xs: Vec<f64> = x.iter().map(|&v| common::f16_to_f32(v) as f64).collect();
            let want = reference(&xs, rows, cols, log);
            let got: Vec<f64> = y.iter().map(|&v| common::f16_to_f32(v) as f64).collect();
            assert_close(Kind::F16, &got, &want, cols, log);
        }
    }
}

#[test]
fn bf16_matches_reference() {
    let mut rng = Rng::fresh();
    for &log in &[false, true] {
        for &(rows, cols) in SHAPES {
            let x: Vec<Bf16> = rng
                .vec(rows * cols, -8.0, 8.0)
                .into_iter()
                .map(common::f32_to_bf16)
                .collect();
            let mut y = vec![Bf16(0x7fc0); rows * cols]; // NaN poison
            softmax::rows(&x, &mut y, rows, cols, &Options::default().log(log)).unwrap();
            let xs: Vec<f64> = x.iter().map(|&v| common::bf16_to_f32(v) as f64).collect();
            let want = reference(&xs, rows, cols, log);
            let got: Vec<f64> = y.iter().map(|&v| common::bf16_to_f32(v) as f64).collect();
            assert_close(Kind::Bf16, &got, &want, cols, log);
        }
    }
}

#[test]
fn half_conversions_used_by_these_tests_are_right() {
    // The helpers above build the inputs; check them on values with known encodings.
    assert_eq!(common::f32_to_f16(1.0).0, 0x3c00);
    assert_eq!(common::f32_to_f16(-2.0).0, 0xc000);
    assert_eq!(common::f32_to_f16(65504.0).0, 0x7bff);
    assert_eq!(common::f32_to_f16(2f32.powi(-24)).0, 0x0001);
    assert_eq!(common::f32_to_f16(1.0 + 2f32.powi(-11)).0, 0x3c00); // tie -> even
    assert_eq!(common::f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)).0, 0x3c02); // tie -> even
    assert_eq!(common::f16_to_f32(F16(0x3555)), 0.333_251_95);
    assert_eq!(common::f32_to_bf16(1.0).0, 0x3f80);
    assert_eq!(common::f32_to_bf16(f32::from_bits(0x3f80_8000)).0, 0x3f80); // tie -> even
    assert_eq!(common::f32_to_bf16(f32::from_bits(0x3f81_8000)).0, 0x3f82); // tie -> even
    assert_eq!(common::bf16_to_f32(Bf16(0xc040)), -3.0);
}

#[test]
fn every_thread_count_matches_reference() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (64, 3000);
    let x = rng.vec(rows * cols, -8.0, 8.0);
    let mut y1 = vec![f32::NAN; rows * cols];
    let mut y2 = vec![f32::NAN; rows * cols];
    softmax::rows(&x, &mut y1, rows, cols, &Options::default().num_threads(1)).unwrap();
    softmax::rows(&x, &mut y2, rows, cols, &Options::default().num_threads(2)).unwrap();
    let want = reference(
        &x.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        rows,
        cols,
        false,
    );
    for y in [&y1, &y2] {
        let got: Vec<f64> = y.iter().map(|&v| v as f64).collect();
        assert_close(Kind::F32, &got, &want, cols, false);
    }
}

#[test]
fn version_and_backends() {
    assert!(
        softmax::version().starts_with("0."),
        "version {}",
        softmax::version()
    );
    assert!(softmax::backend_available(softmax::Backend::Auto));
    assert!(softmax::backend_available(softmax::Backend::Cpu));
}
