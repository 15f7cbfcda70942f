// SPDX-License-Identifier: Apache-2.0
//! softmax::rows_backward and softmax::dropout_backward against the float64 gradient of the
//! stored inputs, with poisoned outputs and fresh random inputs each run.

mod common;

use common::{
    assert_within, backward_tolerances, f16_to_f32, f32_to_f16, reference, reference_backward,
    Kind, Rng,
};
use softmax::{Dropout, Options, F16};

const SHAPES: &[(usize, usize)] = &[(1, 1), (3, 7), (17, 1000), (2, 40_000), (257, 33)];

fn to64(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&e| e as f64).collect()
}

/// A forward result as the library stores it: the reference rounded to f32.
fn forward_output(rng: &mut Rng, rows: usize, cols: usize, log: bool) -> Vec<f32> {
    let x: Vec<f64> = rng
        .vec(rows * cols, -8.0, 8.0)
        .iter()
        .map(|&v| v as f64)
        .collect();
    reference(&x, rows, cols, log)
        .iter()
        .map(|&v| v as f32)
        .collect()
}

#[test]
fn f32_gradient_matches_reference() {
    let mut rng = Rng::fresh();
    for &log in &[false, true] {
        for &(rows, cols) in SHAPES {
            let y = forward_output(&mut rng, rows, cols, log);
            let dy = rng.vec(rows * cols, -1.0, 1.0);
            let mut dx = vec![f32::NAN; rows * cols];
            softmax::rows_backward(&y, &dy, &mut dx, rows, cols, &Options::default().log(log))
                .unwrap();
            let (y64, dy64) = (to64(&y), to64(&dy));
            let want = reference_backward(&y64, &dy64, rows, cols, log);
            let tol = backward_tolerances(Kind::F32, &y64, &dy64, rows, cols, log, false);
            assert_within(&to64(&dx), &want, cols, |i| tol[i]);
        }
    }
}

#[test]
fn f64_and_mixed_storage() {
    // f64 throughout (fp64 arithmetic), and dx stored as the forward input's type: f16 y and dy
    // with f32 dx, f32 y and dy with f64 dx.
    let mut rng = Rng::fresh();
    let (rows, cols) = (33, 513);
    for &log in &[false, true] {
        let y = forward_output(&mut rng, rows, cols, log);
        let dy = rng.vec(rows * cols, -1.0, 1.0);

        let (y64, dy64) = (to64(&y), to64(&dy));
        let mut dx = vec![f64::NAN; rows * cols];
        softmax::rows_backward(
            &y64,
            &dy64,
            &mut dx,
            rows,
            cols,
            &Options::default().log(log),
        )
        .unwrap();
        let want = reference_backward(&y64, &dy64, rows, cols, log);
        let tol = backward_tolerances(Kind::F64, &y64, &dy64, rows, cols, log, true);
        assert_within(&dx, &want, cols, |i| tol[i]);

        let mut dx32 = vec![f64::NAN; rows * cols];
        softmax::rows_backward(&y, &dy, &mut dx32, rows, cols, &Options::default().log(log))
            .unwrap();
        let tol = backward_tolerances(Kind::F64, &y64, &dy64, rows, cols, log, true);
        assert_within(&dx32, &want, cols, |i| tol[i]);

        let y16: Vec<F16> = y.iter().map(|&v| f32_to_f16(v)).collect();
        let dy16: Vec<F16> = dy.iter().map(|&v| f32_to_f16(v)).collect();
        let mut dx16 = vec![f32::NAN; rows * cols];
        softmax::rows_backward(
            &y16,
            &dy16,
            &mut dx16,
            rows,
            cols,
            &Options::default().log(log),
        )
        .unwrap();
        let y16_64: Vec<f64> = y16.iter().map(|&v| f16_to_f32(v) as f64).collect();
        let dy16_64: Vec<f64> = dy16.iter().map(|&v| f16_to_f32(v) as f64).collect();
        let want = reference_backward(&y16_64, &dy16_64, rows, cols, log);
        let tol = backward_tolerances(Kind::F32, &y16_64, &dy16_64, rows, cols, log, false);
        assert_within(&to64(&dx16), &want, cols, |i| tol[i]);
    }
}

#[test]
fn in_place_over_dy_equals_out_of_place() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (64, 1000);
    for &log in &[false, true] {
        let y = forward_output(&mut rng, rows, cols, log);
        let dy = rng.vec(rows * cols, -1.0, 1.0);
        let o = Options::default().log(log);
        let mut dx = vec![f32::NAN; rows * cols];
        softmax::rows_backward(&y, &dy, &mut dx, rows, cols, &o).unwrap();
        let mut dy_dx = dy.clone();
        softmax::rows_backward_in_place(&y, &mut dy_dx, rows, cols, &o).unwrap();
        let (y64, dy64) = (to64(&y), to64(&dy));
        let want = reference_backward(&y64, &dy64, rows, cols, log);
        let tol = backward_tolerances(Kind::F32, &y64, &dy64, rows, cols, log, false);
        assert_within(&to64(&dy_dx), &want, cols, |i| tol[i]);
        assert_within(&to64(&dx), &want, cols, |i| tol[i]);
    }
}

#[test]
fn exact_zero_gradient_where_y_is_zero() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (5, 64);
    let mut x: Vec<f64> = rng
        .vec(rows * cols, -8.0, 8.0)
        .iter()
        .map(|&v| v as f64)
        .collect();
    for i in (0..rows * cols).step_by(3) {
        x[i] = f64::NEG_INFINITY;
    }
    let y: Vec<f32> = reference(&x, rows, cols, false)
        .iter()
        .map(|&v| v as f32)
        .collect();
    let dy = rng.vec(rows * cols, -1.0, 1.0);
    let mut dx = vec![f32::NAN; rows * cols];
    softmax::rows_backward(&y, &dy, &mut dx, rows, cols, &Options::default()).unwrap();
    for i in (0..rows * cols).step_by(3) {
        assert_eq!(
            dx[i].to_bits() & 0x7fff_ffff,
            0,
            "dx[{}] = {} where y == 0",
            i,
            dx[i]
        );
    }
}

/// The dropout gradient through the forward's own mask, in float64.
fn dropout_reference(
    x: &[f32],
    dy: &[f64],
    mask: &[u8],
    p: f64,
    rows: usize,
    cols: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let s = reference(&to64(x), rows, cols, false);
    let g: Vec<f64> = dy
        .iter()
        .zip(mask)
        .map(|(&d, &m)| if m == 1 { d / (1.0 - p) } else { 0.0 })
        .collect();
    let dx = reference_backward(&s, &g, rows, cols, false);
    (s, g, dx)
}

#[test]
fn dropout_gradient_matches_the_gradient_through_the_forward_mask() {
    let mut rng = Rng::fresh();
    for &(rows, cols) in &[(37usize, 700usize), (3, 5000), (64, 33)] {
        let x = rng.vec(rows * cols, -8.0, 8.0);
        let dy = rng.vec(rows * cols, -1.0, 1.0);
        let d = Dropout {
            p: 0.25,
            seed: 1234,
            offset: 7,
        };
        let mut y = vec![0.0f32; rows * cols];
        let mut mask = vec![0u8; rows * cols];
        softmax::dropout(
            &x,
            &mut y,
            Some(&mut mask),
            rows,
            cols,
            d,
            &Options::default(),
        )
        .unwrap();
        let mut dx = vec![f32::NAN; rows * cols];
        softmax::dropout_backward(&x, &dy, &mut dx, rows, cols, d, &Options::default()).unwrap();
        let (s, g, want) = dropout_reference(&x, &to64(&dy), &mask, d.p as f64, rows, cols);
        // s is recomputed in fp32 inside the call: its error counts twice.
        let tol = backward_tolerances(Kind::F32, &s, &g, rows, cols, false, false);
        assert_within(&to64(&dx), &want, cols, |i| 2.0 * tol[i]);

        let mut dy_dx = dy.clone();
        softmax::dropout_backward_in_place(&x, &mut dy_dx, rows, cols, d, &Options::default())
            .unwrap();
        assert_within(&to64(&dy_dx), &want, cols, |i| 2.0 * tol[i]);
    }
}

#[test]
fn dropout_gradient_with_f16_dy_and_p_one() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (20, 300);
    let x = rng.vec(rows * cols, -8.0, 8.0);
    let dy16: Vec<F16> = rng
        .vec(rows * cols, -1.0, 1.0)
        .into_iter()
        .map(f32_to_f16)
        .collect();
    let d = Dropout {
        p: 0.1,
        seed: 3,
        offset: 4,
    };
    let mut mask = vec![0u8; rows * cols];
    let mut y = vec![0.0f32; rows * cols];
    softmax::dropout(
        &x,
        &mut y,
        Some(&mut mask),
        rows,
        cols,
        d,
        &Options::default(),
    )
    .unwrap();
    let mut dx = vec![f32::NAN; rows * cols];
    softmax::dropout_backward(&x, &dy16, &mut dx, rows, cols, d, &Options::default()).unwrap();
    let dy64: Vec<f64> = dy16.iter().map(|&v| f16_to_f32(v) as f64).collect();
    let (s, g, want) = dropout_reference(&x, &dy64, &mask, d.p as f64, rows, cols);
    let tol = backward_tolerances(Kind::F32, &s, &g, rows, cols, false, false);
    assert_within(&to64(&dx), &want, cols, |i| 2.0 * tol[i]);

    let mut zeros = vec![f32::NAN; rows * cols];
    let all = Dropout { p: 1.0, ..d };
    softmax::dropout_backward(&x, &dy16, &mut zeros, rows, cols, all, &Options::default()).unwrap();
    assert!(
        zeros.iter().all(|&v| v == 0.0),
        "p = 1: the gradient is exactly 0"
    );
}
