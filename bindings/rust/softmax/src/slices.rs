// SPDX-License-Identifier: Apache-2.0
//! The safe forward API: host slices in, `Result` out. x and y may hold different element
//! types (y's is the result's storage type); the in-place forms keep one type.

use std::os::raw::c_void;

use softmax_sys as sys;

use crate::checks::{shape, sync_options, Extent::Matrix, Slice};
use crate::element::{Element, Storage};
use crate::error::{check, Error};
use crate::options::{Dropout, Options};

/// y[r, :] = softmax(x[r, :]) for each row of the row-major `rows x cols` matrix x
/// (log-softmax with `options.log`). x and y must each hold exactly rows * cols elements; y may
/// be of another element type than x (e.g. `f32` in, [`Bf16`](crate::Bf16) out).
pub fn rows<X: Element, Y: Element>(
    x: &[X],
    y: &mut [Y],
    rows: usize,
    cols: usize,
    options: &Options,
) -> Result<(), Error> {
    let (r, c) = shape(
        rows,
        cols,
        &[("x", x.len(), Matrix), ("y", y.len(), Matrix)],
    )?;
    let o = sync_options(options, Storage::of::<X, Y>())?;
    // SAFETY: both slices hold rows * cols elements of their dtypes and do not overlap (&/&mut).
    check(unsafe {
        sys::softmax_rows(
            x.as_ptr() as *const c_void,
            y.as_mut_ptr() as *mut c_void,
            r,
            c,
            X::DTYPE.raw(),
            &o,
        )
    })
}

/// [`rows`] with the result written over its input.
pub fn rows_in_place<T: Element>(
    xy: &mut [T],
    rows: usize,
    cols: usize,
    options: &Options,
) -> Result<(), Error> {
    let (r, c) = shape(rows, cols, &[("xy", xy.len(), Matrix)])?;
    let o = sync_options(options, Storage::of::<T, T>())?;
    let p = xy.as_mut_ptr() as *mut c_void;
    // SAFETY: the slice holds rows * cols elements; x == y is the library's in-place mode.
    check(unsafe { sys::softmax_rows(p as *const c_void, p, r, c, T::DTYPE.raw(), &o) })
}

/// Softmax fused with inverted dropout: y = keep ? softmax(x) / (1 - p) : 0. If `keep_mask` is
/// given it receives rows * cols bytes, 1 where kept and 0 where dropped.
pub fn dropout<X: Element, Y: Element>(
    x: &[X],
    y: &mut [Y],
    keep_mask: Option<&mut [u8]>,
    rows: usize,
    cols: usize,
    dropout: Dropout,
    options: &Options,
) -> Result<(), Error> {
    let lens = [("x", x.len(), Matrix), ("y", y.len(), Matrix)];
    // SAFETY: x and y are distinct slices (&/&mut); their lengths go to the check.
    unsafe {
        dropout_checked::<X, Y>(
            x.as_ptr() as *const c_void,
            y.as_mut_ptr() as *mut c_void,
            &lens,
            keep_mask,
            rows,
            cols,
            dropout,
            options,
        )
    }
}

/// [`dropout`] with the result written over its input.
pub fn dropout_in_place<T: Element>(
    xy: &mut [T],
    keep_mask: Option<&mut [u8]>,
    rows: usize,
    cols: usize,
    dropout: Dropout,
    options: &Options,
) -> Result<(), Error> {
    let lens = [("xy", xy.len(), Matrix)];
    let p = xy.as_mut_ptr() as *mut c_void;
    // SAFETY: one slice of T as both x and y: the library's in-place mode.
    unsafe {
        dropout_checked::<T, T>(
            p as *const c_void,
            p,
            &lens,
            keep_mask,
            rows,
            cols,
            dropout,
            options,
        )
    }
}

/// The call behind [`dropout`] and [`dropout_in_place`]: checks that the buffers in `lens` and
/// the mask hold rows * cols elements, then calls the library.
///
/// # Safety
/// `x` and `y` point to slices of `X` and `Y` whose lengths are in `lens`, either distinct or
/// equal.
#[allow(clippy::too_many_arguments)]
unsafe fn dropout_checked<X: Element, Y: Element>(
    x: *const c_void,
    y: *mut c_void,
    lens: &[Slice],
    keep_mask: Option<&mut [u8]>,
    rows: usize,
    cols: usize,
    dropout: Dropout,
    options: &Options,
) -> Result<(), Error> {
    let mut all = lens.to_vec();
    if let Some(m) = keep_mask.as_ref() {
        all.push(("keep_mask", m.len(), Matrix));
    }
    let (r, c) = shape(rows, cols, &all)?;
    let o = sync_options(options, Storage::of::<X, Y>())?;
    let mask = keep_mask.map_or(std::ptr::null_mut(), |m| m.as_mut_ptr());
    // SAFETY: every buffer holds rows * cols elements (checked above); the caller vouches for
    // x and y, and the mask is its own &mut slice.
    check(sys::softmax_dropout(
        x,
        y,
        mask,
        r,
        c,
        X::DTYPE.raw(),
        dropout.p,
        dropout.seed,
        dropout.offset,
        &o,
    ))
}
