// SPDX-License-Identifier: Apache-2.0
//! softmax::dropout: the result agrees with its own mask and the reference, and the mask is a
//! reproducible function of (seed, offset, flat index), whatever the thread count or shape.

mod common;

use common::{reference, tolerance, Kind, Rng};
use softmax::{Dropout, Options};

fn run(x: &[f32], rows: usize, cols: usize, d: Dropout, threads: i32) -> (Vec<f32>, Vec<u8>) {
    let mut y = vec![f32::NAN; rows * cols];
    let mut mask = vec![0xAAu8; rows * cols]; // poison: neither 0 nor 1
    softmax::dropout(
        x,
        &mut y,
        Some(&mut mask),
        rows,
        cols,
        d,
        &Options::default().num_threads(threads),
    )
    .unwrap();
    (y, mask)
}

#[test]
fn output_is_softmax_scaled_where_kept_and_zero_where_dropped() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (37, 700);
    let x = rng.vec(rows * cols, -8.0, 8.0);
    let d = Dropout {
        p: 0.25,
        seed: 1234,
        offset: 7,
    };
    let (y, mask) = run(&x, rows, cols, d, 0);
    let soft = reference(
        &x.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        rows,
        cols,
        false,
    );
    let scale = 1.0 / (1.0 - d.p as f64);
    for i in 0..rows * cols {
        match mask[i] {
            0 => assert_eq!(y[i], 0.0, "element {} dropped but y = {}", i, y[i]),
            1 => {
                let want = soft[i] * scale;
                let tol = tolerance(Kind::F32, want, false, cols) * 2.0;
                assert!(
                    (y[i] as f64 - want).abs() <= tol,
                    "element {}: {} vs {}",
                    i,
                    y[i],
                    want
                );
            }
            other => panic!("mask[{}] = {:#x}, not 0 or 1", i, other),
        }
    }
    // About 1 - p of the elements are kept (binomial, 6 standard deviations).
    let n = (rows * cols) as f64;
    let kept = mask.iter().filter(|&&m| m == 1).count() as f64;
    let sd = (n * 0.25 * 0.75).sqrt();
    assert!((kept - 0.75 * n).abs() < 6.0 * sd, "kept {} of {}", kept, n);
}

#[test]
fn same_seed_and_offset_give_the_same_bits() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (64, 1000);
    let x = rng.vec(rows * cols, -8.0, 8.0);
    let d = Dropout {
        p: 0.1,
        seed: 42,
        offset: 3,
    };
    let (y1, m1) = run(&x, rows, cols, d, 0);
    let (y2, m2) = run(&x, rows, cols, d, 0);
    assert_eq!(m1, m2, "same call, different mask");
    let bits = |y: &[f32]| y.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&y1), bits(&y2), "same call, different output bits");
    // The mask does not depend on how the rows are spread over threads.
    for &threads in &[1, 2, 3] {
        let (_, m) = run(&x, rows, cols, d, threads);
        assert_eq!(m1, m, "mask changed with num_threads = {}", threads);
    }
}

#[test]
fn mask_depends_on_flat_index_only_not_on_shape() {
    // Element i's decision is a function of (seed, offset, i): a [64, 1000] matrix and the same
    // 64000 elements as one row, or as [1000, 64], draw the same mask.
    let mut rng = Rng::fresh();
    let x = rng.vec(64_000, -8.0, 8.0);
    let d = Dropout {
        p: 0.5,
        seed: 9,
        offset: 0,
    };
    let (_, a) = run(&x, 64, 1000, d, 0);
    let (_, b) = run(&x, 1, 64_000, d, 0);
    let (_, c) = run(&x, 1000, 64, d, 0);
    assert_eq!(a, b);
    assert_eq!(a, c);
}

#[test]
fn seed_and_offset_each_change_the_mask() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (16, 512);
    let x = rng.vec(rows * cols, -8.0, 8.0);
    let (_, base) = run(
        &x,
        rows,
        cols,
        Dropout {
            p: 0.5,
            seed: 1,
            offset: 0,
        },
        0,
    );
    let (_, seed2) = run(
        &x,
        rows,
        cols,
        Dropout {
            p: 0.5,
            seed: 2,
            offset: 0,
        },
        0,
    );
    let (_, off1) = run(
        &x,
        rows,
        cols,
        Dropout {
            p: 0.5,
            seed: 1,
            offset: 1,
        },
        0,
    );
    let differ = |a: &[u8], b: &[u8]| a.iter().zip(b).filter(|(p, q)| p != q).count();
    // Independent masks at p = 0.5 differ in about half the places.
    assert!(
        differ(&base, &seed2) > rows * cols / 4,
        "seed did not change the mask"
    );
    assert!(
        differ(&base, &off1) > rows * cols / 4,
        "offset did not change the mask"
    );
}

#[test]
fn p_zero_is_softmax_and_p_one_is_zeros() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (9, 333);
    let x = rng.vec(rows * cols, -8.0, 8.0);
    let mut plain = vec![f32::NAN; rows * cols];
    softmax::rows(&x, &mut plain, rows, cols, &Options::default()).unwrap();
    let (y0, m0) = run(
        &x,
        rows,
        cols,
        Dropout {
            p: 0.0,
            seed: 5,
            offset: 0,
        },
        0,
    );
    assert!(m0.iter().all(|&m| m == 1), "p = 0 dropped something");
    let soft = reference(
        &x.iter().map(|&v| v as f64).collect::<Vec<_>>(),
        rows,
        cols,
        false,
    );
    let got: Vec<f64> = y0.iter().map(|&v| v as f64).collect();
    common::assert_close(Kind::F32, &got, &soft, cols, false);
    let (y1, m1) = run(
        &x,
        rows,
        cols,
        Dropout {
            p: 1.0,
            seed: 5,
            offset: 0,
        },
        0,
    );
    assert!(m1.iter().all(|&m| m == 0), "p = 1 kept something");
    assert!(y1.iter().all(|&v| v == 0.0), "p = 1 left a non-zero");
}

#[test]
fn in_place_and_without_mask_agree_with_the_masked_call() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (12, 1025);
    let x = rng.vec(rows * cols, -8.0, 8.0);
    let d = Dropout {
        p: 0.3,
        seed: 77,
        offset: 11,
    };
    let (y, _) = run(&x, rows, cols, d, 0);
    let mut no_mask = vec![f32::NAN; rows * cols];
    softmax::dropout(&x, &mut no_mask, None, rows, cols, d, &Options::default()).unwrap();
    let mut xy = x.clone();
    softmax::dropout_in_place(&mut xy, None, rows, cols, d, &Options::default()).unwrap();
    let zeros = |v: &[f32]| v.iter().map(|&e| e == 0.0).collect::<Vec<_>>();
    assert_eq!(zeros(&y), zeros(&no_mask));
    assert_eq!(zeros(&y), zeros(&xy));
    for i in 0..rows * cols {
        let tol = tolerance(Kind::F32, y[i] as f64, false, cols) * 2.0;
        assert!((no_mask[i] - y[i]).abs() as f64 <= tol && (xy[i] - y[i]).abs() as f64 <= tol);
    }
}
