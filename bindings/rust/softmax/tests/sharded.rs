// SPDX-License-Identifier: Apache-2.0
//! The sharded-row helpers: rows split by columns into shards, per-shard statistics merged as a
//! distributed caller would (in f32, as the statistics are), and the result compared with the
//! unsharded float64 softmax and gradient.

mod common;

use common::{
    arithmetic, assert_within, backward_tolerances, reference, reference_backward, tolerance, Kind,
    Rng,
};
use softmax::Options;

const WIDTHS: &[&[usize]] = &[&[1000], &[300, 700], &[1, 40, 959, 2000], &[64, 64, 64]];

/// The columns [start, start + width) of every row of a rows x cols matrix.
fn shard(x: &[f32], rows: usize, cols: usize, start: usize, width: usize) -> Vec<f32> {
    (0..rows)
        .flat_map(|r| {
            x[r * cols + start..r * cols + start + width]
                .iter()
                .cloned()
        })
        .collect()
}

/// M = max of the shard maxima; S = sum of row_sumexp * exp(shard max - M), leaving out the
/// shards whose row_sumexp is 0.
fn merge(stats: &[(Vec<f32>, Vec<f32>)], rows: usize) -> (Vec<f32>, Vec<f32>) {
    let mut big = vec![f32::NEG_INFINITY; rows];
    for (m, _) in stats {
        for r in 0..rows {
            big[r] = big[r].max(m[r]);
        }
    }
    let mut total = vec![0.0f32; rows];
    for (m, s) in stats {
        for r in 0..rows {
            if s[r] != 0.0 {
                total[r] += s[r] * (m[r] - big[r]).exp();
            }
        }
    }
    (big, total)
}

fn sharded_softmax(x: &[f32], rows: usize, widths: &[usize], log: bool) -> Vec<f32> {
    let cols: usize = widths.iter().sum();
    let o = Options::default().log(log);
    let mut starts = vec![0usize];
    for w in widths {
        starts.push(starts.last().unwrap() + w);
    }
    let parts: Vec<Vec<f32>> = widths
        .iter()
        .zip(&starts)
        .map(|(&w, &s)| shard(x, rows, cols, s, w))
        .collect();
    let stats: Vec<(Vec<f32>, Vec<f32>)> = parts
        .iter()
        .zip(widths)
        .map(|(p, &w)| {
            let (mut m, mut s) = (vec![f32::NAN; rows], vec![f32::NAN; rows]);
            softmax::row_stats(p, &mut m, &mut s, rows, w, &o).unwrap();
            (m, s)
        })
        .collect();
    let (big, total) = merge(&stats, rows);
    let mut y = vec![f32::NAN; rows * cols];
    for ((p, &w), &s) in parts.iter().zip(widths).zip(&starts) {
        let mut part = vec![f32::NAN; rows * w];
        softmax::rows_from_stats(p, &mut part, &big, &total, rows, w, &o).unwrap();
        for r in 0..rows {
            y[r * cols + s..r * cols + s + w].copy_from_slice(&part[r * w..(r + 1) * w]);
        }
    }
    y
}

#[test]
fn merged_shards_give_the_unsharded_softmax() {
    let mut rng = Rng::fresh();
    let rows = 19;
    for &log in &[false, true] {
        for widths in WIDTHS {
            let cols: usize = widths.iter().sum();
            let x = rng.vec(rows * cols, -8.0, 8.0);
            let y = sharded_softmax(&x, rows, widths, log);
            let want = reference(
                &x.iter().map(|&v| v as f64).collect::<Vec<_>>(),
                rows,
                cols,
                log,
            );
            // The merge's f32 rounding adds a few units to the arithmetic's error.
            let extra = 4.0 * arithmetic(cols, false);
            let got: Vec<f64> = y.iter().map(|&v| v as f64).collect();
            assert_within(&got, &want, cols, |i| {
                tolerance(Kind::F32, want[i], log, cols)
                    + extra * (want[i].abs() + if log { 1.0 } else { 0.0 })
            });
        }
    }
}

#[test]
fn row_stats_of_one_shard_and_an_all_minus_infinity_row() {
    let mut rng = Rng::fresh();
    let (rows, cols) = (4, 96);
    let mut x = rng.vec(rows * cols, -8.0, 8.0);
    for c in 0..cols {
        x[cols + c] = f32::NEG_INFINITY;
    }
    let (mut m, mut s) = (vec![f32::NAN; rows], vec![f32::NAN; rows]);
    softmax::row_stats(&x, &mut m, &mut s, rows, cols, &Options::default()).unwrap();
    assert_eq!((m[1], s[1]), (f32::NEG_INFINITY, 0.0));
    for r in [0usize, 2, 3] {
        let row = &x[r * cols..(r + 1) * cols];
        let max = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(m[r], max, "row_max is exact");
        let sum: f64 = row.iter().map(|&v| (v as f64 - max as f64).exp()).sum();
        let tol = tolerance(Kind::F32, sum, false, cols);
        assert!((s[r] as f64 - sum).abs() <= tol, "{} vs {}", s[r], sum);
    }
}

#[test]
fn summed_row_dots_give_the_unsharded_gradient() {
    let mut rng = Rng::fresh();
    let rows = 23;
    for &log in &[false, true] {
        for widths in WIDTHS {
            let cols: usize = widths.iter().sum();
            let x: Vec<f64> = rng
                .vec(rows * cols, -8.0, 8.0)
                .iter()
                .map(|&v| v as f64)
                .collect();
            let y: Vec<f32> = reference(&x, rows, cols, log)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let dy = rng.vec(rows * cols, -1.0, 1.0);
            let o = Options::default().log(log);
            let mut start = 0;
            let mut row_dot = vec![0.0f32; rows];
            let mut parts = Vec::new();
            for &w in widths.iter() {
                let (ys, dys) = (
                    shard(&y, rows, cols, start, w),
                    shard(&dy, rows, cols, start, w),
                );
                let mut dot = vec![f32::NAN; rows];
                softmax::backward_row_stats(&ys, &dys, &mut dot, rows, w, &o).unwrap();
                for r in 0..rows {
                    row_dot[r] += dot[r];
                }
                parts.push((ys, dys, start, w));
                start += w;
            }
            let mut dx = vec![f32::NAN; rows * cols];
            for (ys, dys, s, w) in &parts {
                let mut part = vec![f32::NAN; rows * w];
                softmax::rows_backward_from_stats(ys, dys, &mut part, &row_dot, rows, *w, &o)
                    .unwrap();
                for r in 0..rows {
                    dx[r * cols + s..r * cols + s + w].copy_from_slice(&part[r * w..(r + 1) * w]);
                }
            }
            let y64: Vec<f64> = y.iter().map(|&v| v as f64).collect();
            let dy64: Vec<f64> = dy.iter().map(|&v| v as f64).collect();
            let want = reference_backward(&y64, &dy64, rows, cols, log);
            let tol = backward_tolerances(Kind::F32, &y64, &dy64, rows, cols, log, false);
            let got: Vec<f64> = dx.iter().map(|&v| v as f64).collect();
            assert_within(&got, &want, cols, |i| 4.0 * tol[i]);
        }
    }
}
