// SPDX-License-Identifier: Apache-2.0
//! Pointer-level calls, for device memory and CUDA streams: the library is handed exactly what
//! it is given, and sizes are the C API's signed integers so that it judges them itself.
//!
//! Every function takes the storage types as a [`Storage`] (or a plain [`Dtype`](crate::Dtype)
//! for the same type on both sides): arrays that mirror the forward call's x (x, dx) are stored
//! as `storage.x`, those that mirror its y (y, dy) as `storage.y`, so a mixed-precision caller
//! passes the same storage forward and backward. Per-row statistics are `f32` arrays of `rows`
//! elements in the same memory space as the other arrays.
//!
//! # Safety (all functions here)
//!
//! - Each pointer must point to as many elements as its array holds (`rows * cols`, or `rows`
//!   for statistics) of its storage type, valid (and, for outputs, unaliased by anything else
//!   that reads or writes them) until the work has finished: on the CPU backend until the
//!   function returns, on the CUDA backend until `stream` has executed it. Only the documented
//!   in-place pairs (y == x forward, dx == dy backward) may share memory.
//! - Memory must be reachable by the chosen backend: host memory for the CPU, device, managed
//!   or pinned memory for CUDA (the library checks this where the CUDA driver can tell).
//! - `stream` must be null (the legacy default stream) or a live `cudaStream_t` of the current
//!   device; it is ignored by the CPU backend.
//!
//! On the CUDA backend every call is asynchronous: `Ok` means the work was queued on `stream`,
//! not that it has finished; synchronise the stream before reading results on the host.

use std::os::raw::c_void;

use softmax_sys as sys;

use crate::element::Storage;
use crate::error::{check, Error};
use crate::options::{Dropout, Options};

/// `softmax_rows` on raw pointers, e.g. CUDA device memory with `Backend::Cuda` (or `Auto`,
/// which picks CUDA for device pointers). `x == y` (in place) is allowed for equal element sizes.
///
/// # Safety
///
/// See the [module documentation](self).
pub unsafe fn rows_raw(
    x: *const c_void,
    y: *mut c_void,
    rows: i64,
    cols: i64,
    dtype: impl Into<Storage>,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let s = dtype.into();
    let o = options.to_c(stream, s);
    check(sys::softmax_rows(x, y, rows, cols, s.x.raw(), &o))
}

/// `softmax_dropout` on raw pointers; `keep_mask` may be null (no mask written) or point to
/// `rows * cols` bytes in the same memory space as y, overlapping neither x nor y.
///
/// # Safety
///
/// See the [module documentation](self).
#[allow(clippy::too_many_arguments)]
pub unsafe fn dropout_raw(
    x: *const c_void,
    y: *mut c_void,
    keep_mask: *mut u8,
    rows: i64,
    cols: i64,
    dtype: impl Into<Storage>,
    dropout: Dropout,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let s = dtype.into();
    let o = options.to_c(stream, s);
    check(sys::softmax_dropout(
        x,
        y,
        keep_mask,
        rows,
        cols,
        s.x.raw(),
        dropout.p,
        dropout.seed,
        dropout.offset,
        &o,
    ))
}

/// `softmax_rows_backward` on raw pointers: dx from the forward's output y and the incoming
/// gradient dy (`options.log` for log-softmax). `dx == dy` is allowed for equal element sizes.
///
/// # Safety
///
/// See the [module documentation](self).
#[allow(clippy::too_many_arguments)]
pub unsafe fn rows_backward_raw(
    y: *const c_void,
    dy: *const c_void,
    dx: *mut c_void,
    rows: i64,
    cols: i64,
    storage: impl Into<Storage>,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let s = storage.into();
    let o = options.to_c(stream, s);
    check(sys::softmax_rows_backward(
        y,
        dy,
        dx,
        rows,
        cols,
        s.x.raw(),
        &o,
    ))
}

/// `softmax_dropout_backward` on raw pointers: dx from x itself and the forward's
/// (p, seed, offset). `dx == dy` is allowed for equal element sizes.
///
/// # Safety
///
/// See the [module documentation](self).
#[allow(clippy::too_many_arguments)]
pub unsafe fn dropout_backward_raw(
    x: *const c_void,
    dy: *const c_void,
    dx: *mut c_void,
    rows: i64,
    cols: i64,
    storage: impl Into<Storage>,
    dropout: Dropout,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let s = storage.into();
    let o = options.to_c(stream, s);
    check(sys::softmax_dropout_backward(
        x,
        dy,
        dx,
        rows,
        cols,
        s.x.raw(),
        dropout.p,
        dropout.seed,
        dropout.offset,
        &o,
    ))
}

/// `softmax_row_stats` on raw pointers: this shard's per-row max and sum of exponentials.
///
/// # Safety
///
/// See the [module documentation](self).
#[allow(clippy::too_many_arguments)]
pub unsafe fn row_stats_raw(
    x: *const c_void,
    row_max: *mut f32,
    row_sumexp: *mut f32,
    rows: i64,
    cols: i64,
    storage: impl Into<Storage>,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let s = storage.into();
    let o = options.to_c(stream, s);
    check(sys::softmax_row_stats(
        x,
        row_max,
        row_sumexp,
        rows,
        cols,
        s.x.raw(),
        &o,
    ))
}

/// `softmax_rows_from_stats` on raw pointers: this shard's softmax from the merged statistics.
///
/// # Safety
///
/// See the [module documentation](self).
#[allow(clippy::too_many_arguments)]
pub unsafe fn rows_from_stats_raw(
    x: *const c_void,
    y: *mut c_void,
    row_max: *const f32,
    row_sumexp: *const f32,
    rows: i64,
    cols: i64,
    storage: impl Into<Storage>,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let s = storage.into();
    let o = options.to_c(stream, s);
    check(sys::softmax_rows_from_stats(
        x,
        y,
        row_max,
        row_sumexp,
        rows,
        cols,
        s.x.raw(),
        &o,
    ))
}

/// `softmax_backward_row_stats` on raw pointers: this shard's part of the backward's row sums.
///
/// # Safety
///
/// See the [module documentation](self).
#[allow(clippy::too_many_arguments)]
pub unsafe fn backward_row_stats_raw(
    y: *const c_void,
    dy: *const c_void,
    row_dot: *mut f32,
    rows: i64,
    cols: i64,
    storage: impl Into<Storage>,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let s = storage.into();
    let o = options.to_c(stream, s);
    check(sys::softmax_backward_row_stats(
        y,
        dy,
        row_dot,
        rows,
        cols,
        s.x.raw(),
        &o,
    ))
}

/// `softmax_rows_backward_from_stats` on raw pointers: this shard's gradient from the summed
/// row_dot. `dx == dy` is allowed for equal element sizes.
///
/// # Safety
///
/// See the [module documentation](self).
#[allow(clippy::too_many_arguments)]
pub unsafe fn rows_backward_from_stats_raw(
    y: *const c_void,
    dy: *const c_void,
    dx: *mut c_void,
    row_dot: *const f32,
    rows: i64,
    cols: i64,
    storage: impl Into<Storage>,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let s = storage.into();
    let o = options.to_c(stream, s);
    check(sys::softmax_rows_backward_from_stats(
        y,
        dy,
        dx,
        row_dot,
        rows,
        cols,
        s.x.raw(),
        &o,
    ))
}
