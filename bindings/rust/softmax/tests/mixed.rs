// SPDX-License-Identifier: Apache-2.0
//! f64 elements, and results stored in another element type than their input (y_dtype),
//! against the float64 reference with poisoned outputs.

mod common;

use common::{
    assert_within, bf16_to_f32, f16_to_f32, f32_to_f16, reference, tolerance, tolerance_with, Kind,
    Rng,
};
use softmax::{Bf16, Dropout, Options, F16};

const SHAPES: &[(usize, usize)] = &[(1, 1), (3, 7), (17, 1000), (2, 40_000), (257, 33)];

#[test]
fn f64_matches_reference() {
    let mut rng = Rng::fresh();
    for &log in &[false, true] {
        for &(rows, cols) in SHAPES {
            let x: Vec<f64> = rng
                .vec(rows * cols, -8.0, 8.0)
                .iter()
                .map(|&v| v as f64)
                .collect();
            let mut y = vec![f64::NAN; rows * cols];
            softmax::rows(&x, &mut y, rows, cols, &Options::default().log(log)).unwrap();
            let want = reference(&x, rows, cols, log);
            assert_within(&y, &want, cols, |i| {
                tolerance(Kind::F64, want[i], log, cols)
            });
        }
    }
}

#[test]
fn f32_input_with_f16_bf16_and_f64_results() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (17, 1000);
    for &log in &[false, true] {
        let x = rng.vec(rows * cols, -8.0, 8.0);
        let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
        let want = reference(&x64, rows, cols, log);
        let o = Options::default().log(log);

        let mut y16 = vec![F16(0x7e00); rows * cols];
        softmax::rows(&x, &mut y16, rows, cols, &o).unwrap();
        let got: Vec<f64> = y16.iter().map(|&v| f16_to_f32(v) as f64).collect();
        assert_within(&got, &want, cols, |i| {
            tolerance(Kind::F16, want[i], log, cols)
        });

        let mut ybf = vec![Bf16(0x7fc0); rows * cols];
        softmax::rows(&x, &mut ybf, rows, cols, &o).unwrap();
        let got: Vec<f64> = ybf.iter().map(|&v| bf16_to_f32(v) as f64).collect();
        assert_within(&got, &want, cols, |i| {
            tolerance(Kind::Bf16, want[i], log, cols)
        });

        let mut y64 = vec![f64::NAN; rows * cols];
        softmax::rows(&x, &mut y64, rows, cols, &o).unwrap();
        assert_within(&y64, &want, cols, |i| {
            tolerance_with(Kind::F64, want[i], log, cols, true)
        });
    }
}

#[test]
fn f16_input_with_f32_result_and_dropout_keeps_its_mask() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (12, 1025);
    let x: Vec<F16> = rng
        .vec(rows * cols, -8.0, 8.0)
        .into_iter()
        .map(f32_to_f16)
        .collect();
    let xs: Vec<f64> = x.iter().map(|&v| f16_to_f32(v) as f64).collect();
    let want = reference(&xs, rows, cols, false);
    let mut y = vec![f32::NAN; rows * cols];
    softmax::rows(&x, &mut y, rows, cols, &Options::default()).unwrap();
    let got: Vec<f64> = y.iter().map(|&v| v as f64).collect();
    assert_within(&got, &want, cols, |i| {
        tolerance(Kind::F32, want[i], false, cols)
    });

    // The keep mask does not depend on the storage types.
    let d = Dropout {
        p: 0.3,
        seed: 77,
        offset: 11,
    };
    let (mut same, mut same_mask) = (vec![F16(0); rows * cols], vec![0xAAu8; rows * cols]);
    softmax::dropout(
        &x,
        &mut same,
        Some(&mut same_mask),
        rows,
        cols,
        d,
        &Options::default(),
    )
    .unwrap();
    let (mut wide, mut wide_mask) = (vec![f32::NAN; rows * cols], vec![0xAAu8; rows * cols]);
    softmax::dropout(
        &x,
        &mut wide,
        Some(&mut wide_mask),
        rows,
        cols,
        d,
        &Options::default(),
    )
    .unwrap();
    assert_eq!(same_mask, wide_mask);
    let scale = 1.0 / (1.0 - d.p as f64);
    for i in 0..rows * cols {
        if wide_mask[i] == 0 {
            assert_eq!(wide[i], 0.0);
        } else {
            let w = want[i] * scale;
            let tol = 2.0 * tolerance(Kind::F32, w, false, cols);
            assert!(
                (wide[i] as f64 - w).abs() <= tol,
                "{}: {} vs {}",
                i,
                wide[i],
                w
            );
        }
    }
}
