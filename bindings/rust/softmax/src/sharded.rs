// SPDX-License-Identifier: Apache-2.0
//! Rows sharded by columns: each process or device holds a `rows x cols` slice of longer rows.
//!
//! Forward: [`row_stats`] on every shard; merge across shards with `M = max of the shard
//! maxima` and `S = sum of row_sumexp * exp(shard max - M)` (leaving out terms whose row_sumexp
//! is 0), with any all-reduce; then [`rows_from_stats`] with (M, S) on every shard gives each
//! row as the unsharded [`rows`](crate::rows) would. Backward: [`backward_row_stats`] on every
//! shard, sum the row_dot arrays, then [`rows_backward_from_stats`]. Statistics are `f32`
//! slices of `rows` elements; f64 rows are refused (`InvalidDtype`), as float statistics cannot
//! carry their range.

use std::os::raw::c_void;

use softmax_sys as sys;

use crate::checks::{
    shape, sync_options,
    Extent::{Matrix, PerRow},
};
use crate::element::{Element, Storage};
use crate::error::{check, Error};
use crate::options::Options;

/// This shard's per-row statistics: `row_max[r] = max x[r, :]` and
/// `row_sumexp[r] = sum exp(x[r, :] - row_max[r])`. An all -inf row gives max -inf and sum 0.
pub fn row_stats<X: Element>(
    x: &[X],
    row_max: &mut [f32],
    row_sumexp: &mut [f32],
    rows: usize,
    cols: usize,
    options: &Options,
) -> Result<(), Error> {
    let lens = [
        ("x", x.len(), Matrix),
        ("row_max", row_max.len(), PerRow),
        ("row_sumexp", row_sumexp.len(), PerRow),
    ];
    let (r, c) = shape(rows, cols, &lens)?;
    let o = sync_options(options, Storage::of::<X, X>())?;
    // SAFETY: each slice holds the elements checked above; the outputs are distinct &mut slices.
    check(unsafe {
        sys::softmax_row_stats(
            x.as_ptr() as *const c_void,
            row_max.as_mut_ptr(),
            row_sumexp.as_mut_ptr(),
            r,
            c,
            X::DTYPE.raw(),
            &o,
        )
    })
}

/// This shard's softmax from the merged statistics: `y = exp(x - row_max) / row_sumexp`
/// (`options.log`: `x - row_max - log(row_sumexp)`). y may be of another type than x.
pub fn rows_from_stats<X: Element, Y: Element>(
    x: &[X],
    y: &mut [Y],
    row_max: &[f32],
    row_sumexp: &[f32],
    rows: usize,
    cols: usize,
    options: &Options,
) -> Result<(), Error> {
    let lens = [
        ("x", x.len(), Matrix),
        ("y", y.len(), Matrix),
        ("row_max", row_max.len(), PerRow),
        ("row_sumexp", row_sumexp.len(), PerRow),
    ];
    let (r, c) = shape(rows, cols, &lens)?;
    let o = sync_options(options, Storage::of::<X, Y>())?;
    // SAFETY: each slice holds the elements checked above; y is its own &mut slice.
    check(unsafe {
        sys::softmax_rows_from_stats(
            x.as_ptr() as *const c_void,
            y.as_mut_ptr() as *mut c_void,
            row_max.as_ptr(),
            row_sumexp.as_ptr(),
            r,
            c,
            X::DTYPE.raw(),
            &o,
        )
    })
}

/// This shard's part of the backward's row sums: `row_dot[r] = sum dy[r, :] * y[r, :]`
/// (`options.log`: `sum dy[r, :]`).
pub fn backward_row_stats<Y: Element>(
    y: &[Y],
    dy: &[Y],
    row_dot: &mut [f32],
    rows: usize,
    cols: usize,
    options: &Options,
) -> Result<(), Error> {
    let lens = [
        ("y", y.len(), Matrix),
        ("dy", dy.len(), Matrix),
        ("row_dot", row_dot.len(), PerRow),
    ];
    let (r, c) = shape(rows, cols, &lens)?;
    let o = sync_options(options, Storage::of::<Y, Y>())?;
    // SAFETY: each slice holds the elements checked above; row_dot is its own &mut slice.
    check(unsafe {
        sys::softmax_backward_row_stats(
            y.as_ptr() as *const c_void,
            dy.as_ptr() as *const c_void,
            row_dot.as_mut_ptr(),
            r,
            c,
            Y::DTYPE.raw(),
            &o,
        )
    })
}

/// This shard's gradient from the summed row_dot: `dx = y * (dy - row_dot)`
/// (`options.log`: `dx = dy - exp(y) * row_dot`). dx may be of another type than y.
pub fn rows_backward_from_stats<Y: Element, X: Element>(
    y: &[Y],
    dy: &[Y],
    dx: &mut [X],
    row_dot: &[f32],
    rows: usize,
    cols: usize,
    options: &Options,
) -> Result<(), Error> {
    let lens = [
        ("y", y.len(), Matrix),
        ("dy", dy.len(), Matrix),
        ("dx", dx.len(), Matrix),
        ("row_dot", row_dot.len(), PerRow),
    ];
    let (r, c) = shape(rows, cols, &lens)?;
    let o = sync_options(options, Storage::of::<X, Y>())?;
    // SAFETY: each slice holds the elements checked above; dx is its own &mut slice.
    check(unsafe {
        sys::softmax_rows_backward_from_stats(
            y.as_ptr() as *const c_void,
            dy.as_ptr() as *const c_void,
            dx.as_mut_ptr() as *mut c_void,
            row_dot.as_ptr(),
            r,
            c,
            X::DTYPE.raw(),
            &o,
        )
    })
}
