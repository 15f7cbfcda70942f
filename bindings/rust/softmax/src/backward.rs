// SPDX-License-Identifier: Apache-2.0
//! The safe backward API: gradients of [`rows`](crate::rows) and [`dropout`](crate::dropout)
//! on host slices. Element types follow the forward call: y and dy are of the forward result's
//! type `Y`, x and dx of its input's type `X`, so a mixed-precision step passes the same types
//! both ways.

use std::os::raw::c_void;

use softmax_sys as sys;

use crate::checks::{shape, sync_options, Extent::Matrix};
use crate::element::{Element, Storage};
use crate::error::{check, Error};
use crate::options::{Dropout, Options};

/// Gradient of [`rows`](crate::rows) from its output: per row
/// `dx = y * (dy - sum(dy * y))`, or with `options.log` (y is then the log-softmax output)
/// `dx = dy - exp(y) * sum(dy)`. All three slices hold rows * cols elements.
pub fn rows_backward<Y: Element, X: Element>(
    y: &[Y],
    dy: &[Y],
    dx: &mut [X],
    rows: usize,
    cols: usize,
    options: &Options,
) -> Result<(), Error> {
    let lens = [
        ("y", y.len(), Matrix),
        ("dy", dy.len(), Matrix),
        ("dx", dx.len(), Matrix),
    ];
    let (r, c) = shape(rows, cols, &lens)?;
    let o = sync_options(options, Storage::of::<X, Y>())?;
    // SAFETY: every slice holds rows * cols elements of its dtype; dx is its own &mut slice.
    check(unsafe {
        sys::softmax_rows_backward(
            y.as_ptr() as *const c_void,
            dy.as_ptr() as *const c_void,
            dx.as_mut_ptr() as *mut c_void,
            r,
            c,
            X::DTYPE.raw(),
            &o,
        )
    })
}

/// [`rows_backward`] with dx written over dy.
pub fn rows_backward_in_place<T: Element>(
    y: &[T],
    dy_dx: &mut [T],
    rows: usize,
    cols: usize,
    options: &Options,
) -> Result<(), Error> {
    let lens = [("y", y.len(), Matrix), ("dy_dx", dy_dx.len(), Matrix)];
    let (r, c) = shape(rows, cols, &lens)?;
    let o = sync_options(options, Storage::of::<T, T>())?;
    let p = dy_dx.as_mut_ptr() as *mut c_void;
    // SAFETY: both slices hold rows * cols elements; dx == dy is the library's in-place mode.
    check(unsafe {
        sys::softmax_rows_backward(
            y.as_ptr() as *const c_void,
            p as *const c_void,
            p,
            r,
            c,
            T::DTYPE.raw(),
            &o,
        )
    })
}

/// Gradient of [`dropout`](crate::dropout) with respect to x, from x itself and the forward's
/// `dropout` parameters (softmax and mask are recomputed, none is kept): per row
/// `g = keep ? dy / (1 - p) : 0; dx = s * (g - sum(s * g))` with `s = softmax(x)`.
pub fn dropout_backward<X: Element, Y: Element>(
    x: &[X],
    dy: &[Y],
    dx: &mut [X],
    rows: usize,
    cols: usize,
    dropout: Dropout,
    options: &Options,
) -> Result<(), Error> {
    let lens = [
        ("x", x.len(), Matrix),
        ("dy", dy.len(), Matrix),
        ("dx", dx.len(), Matrix),
    ];
    let (r, c) = shape(rows, cols, &lens)?;
    let o = sync_options(options, Storage::of::<X, Y>())?;
    // SAFETY: every slice holds rows * cols elements of its dtype; dx is its own &mut slice.
    check(unsafe {
        sys::softmax_dropout_backward(
            x.as_ptr() as *const c_void,
            dy.as_ptr() as *const c_void,
            dx.as_mut_ptr() as *mut c_void,
            r,
            c,
            X::DTYPE.raw(),
            dropout.p,
            dropout.seed,
            dropout.offset,
            &o,
        )
    })
}

/// [`dropout_backward`] with dx written over dy.
pub fn dropout_backward_in_place<T: Element>(
    x: &[T],
    dy_dx: &mut [T],
    rows: usize,
    cols: usize,
    dropout: Dropout,
    options: &Options,
) -> Result<(), Error> {
    let lens = [("x", x.len(), Matrix), ("dy_dx", dy_dx.len(), Matrix)];
    let (r, c) = shape(rows, cols, &lens)?;
    let o = sync_options(options, Storage::of::<T, T>())?;
    let p = dy_dx.as_mut_ptr() as *mut c_void;
    // SAFETY: both slices hold rows * cols elements; dx == dy is the library's in-place mode.
    check(unsafe {
        sys::softmax_dropout_backward(
            x.as_ptr() as *const c_void,
            p as *const c_void,
            p,
            r,
            c,
            T::DTYPE.raw(),
            dropout.p,
            dropout.seed,
            dropout.offset,
            &o,
        )
    })
}
