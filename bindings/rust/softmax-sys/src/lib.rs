// SPDX-License-Identifier: Apache-2.0
//! Raw declarations of libsoftmax's C ABI, written by hand from `include/softmax/softmax.h`.
//!
//! Everything here is `unsafe` to call and mirrors the header one to one; the safe API lives in
//! the `softmax` crate, and the header's comments are the full reference for each function.
//! C enums are declared as `c_int` type aliases with constants rather than Rust enums, because a
//! future library may return a value this crate does not know, and an unknown discriminant in a
//! Rust enum would be undefined behaviour.
//!
//! Every array is a row-major `[rows, cols]` matrix, densely packed. `dtype` is the storage type
//! of x; y is stored as x unless the options set [`SOFTMAX_FLAG_Y_DTYPE`], which makes
//! [`softmax_options::y_dtype`] y's type. The backward and sharded functions take the forward
//! call's `(dtype, options)` unchanged: arrays that mirror y (y, dy) are stored as y, those that
//! mirror x (x, dx) as x. `rows == 0` or `cols == 0` succeeds and reads no pointer.
//!
//! The test `tests/abi.rs` checks the constants against the library's own status names and the
//! layout of [`softmax_options`] against a C program compiled from the header.

#![allow(non_camel_case_types)]
#![deny(missing_docs)]

use std::os::raw::{c_char, c_int, c_void};

/// Major version of the header these declarations were written from.
pub const SOFTMAX_VERSION_MAJOR: u32 = 0;
/// Minor version of the header these declarations were written from.
pub const SOFTMAX_VERSION_MINOR: u32 = 2;
/// Patch version of the header these declarations were written from.
pub const SOFTMAX_VERSION_PATCH: u32 = 0;

/// `softmax_status`: values are part of the ABI and only ever appended.
pub type softmax_status = c_int;
/// The call succeeded.
pub const SOFTMAX_STATUS_SUCCESS: softmax_status = 0;
/// A required pointer was NULL.
pub const SOFTMAX_STATUS_NULL_POINTER: softmax_status = 1;
/// rows or cols < 0.
pub const SOFTMAX_STATUS_INVALID_SIZE: softmax_status = 2;
/// rows * cols * element size does not fit.
pub const SOFTMAX_STATUS_SIZE_OVERFLOW: softmax_status = 3;
/// dtype (or options->y_dtype) is not a `softmax_dtype` value, or not one the function takes.
pub const SOFTMAX_STATUS_INVALID_DTYPE: softmax_status = 4;
/// options->backend is not a `softmax_backend` value.
pub const SOFTMAX_STATUS_INVALID_BACKEND: softmax_status = 5;
/// Bad struct_size, unknown flags, a flag the function does not take, or a bad field.
pub const SOFTMAX_STATUS_INVALID_OPTIONS: softmax_status = 6;
/// The dropout p is NaN or outside [0, 1].
pub const SOFTMAX_STATUS_INVALID_PROBABILITY: softmax_status = 7;
/// Arrays partially overlap (the documented in-place pairs may be identical).
pub const SOFTMAX_STATUS_OVERLAPPING_BUFFERS: softmax_status = 8;
/// The backend cannot run here, e.g. CUDA asked for but no driver or device.
pub const SOFTMAX_STATUS_BACKEND_UNAVAILABLE: softmax_status = 9;
/// Host pointer to CUDA, device pointer to the CPU, or mixed.
pub const SOFTMAX_STATUS_WRONG_MEMORY_SPACE: softmax_status = 10;
/// A CUDA runtime call or kernel launch failed.
pub const SOFTMAX_STATUS_CUDA_ERROR: softmax_status = 11;
/// Workspace could not be allocated.
pub const SOFTMAX_STATUS_OUT_OF_MEMORY: softmax_status = 12;
/// A bug in libsoftmax.
pub const SOFTMAX_STATUS_INTERNAL_ERROR: softmax_status = 13;

/// `softmax_dtype`: storage type of an array.
pub type softmax_dtype = c_int;
/// IEEE binary32.
pub const SOFTMAX_DTYPE_F32: softmax_dtype = 0;
/// IEEE binary16.
pub const SOFTMAX_DTYPE_F16: softmax_dtype = 1;
/// bfloat16 (the upper half of a binary32).
pub const SOFTMAX_DTYPE_BF16: softmax_dtype = 2;
/// IEEE binary64; the arithmetic is fp64 when x or y is stored as f64.
pub const SOFTMAX_DTYPE_F64: softmax_dtype = 3;

/// `softmax_backend`.
pub type softmax_backend = c_int;
/// CUDA when the pointers are device memory, else CPU.
pub const SOFTMAX_BACKEND_AUTO: softmax_backend = 0;
/// OpenMP over rows and over chunks of long rows.
pub const SOFTMAX_BACKEND_CPU: softmax_backend = 1;
/// Asynchronous on `options->stream`.
pub const SOFTMAX_BACKEND_CUDA: softmax_backend = 2;

/// Bit of [`softmax_options::flags`]: log-softmax (and its gradient).
pub const SOFTMAX_FLAG_LOG: u32 = 0x1;
/// Bit of [`softmax_options::flags`]: y (and dy) are stored as [`softmax_options::y_dtype`].
pub const SOFTMAX_FLAG_Y_DTYPE: u32 = 0x2;

/// The largest `struct_size` accepted; bytes past `size_of::<softmax_options>()` must be zero.
pub const SOFTMAX_OPTIONS_MAX_SIZE: u32 = 4096;

/// `softmax_options`. Set `struct_size` to `size_of::<softmax_options>()`, or start from
/// [`softmax_default_options`], which fills it in.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct softmax_options {
    /// `size_of::<softmax_options>()`.
    pub struct_size: usize,
    /// Which backend runs the call; default [`SOFTMAX_BACKEND_AUTO`].
    pub backend: softmax_backend,
    /// `SOFTMAX_FLAG_*` bits, default 0.
    pub flags: u32,
    /// `cudaStream_t` for the CUDA backend; null is the legacy default stream.
    pub stream: *mut c_void,
    /// CPU backend: threads to use, 0 = OpenMP's default.
    pub num_threads: i32,
    /// Storage type of y and dy; read only with [`SOFTMAX_FLAG_Y_DTYPE`].
    pub y_dtype: softmax_dtype,
}

extern "C" {
    /// `y[r, :] = softmax(x[r, :])` for every row (log-softmax with [`SOFTMAX_FLAG_LOG`]).
    /// `x == y` (in place) is allowed when both have the same element size.
    pub fn softmax_rows(
        x: *const c_void,
        y: *mut c_void,
        rows: i64,
        cols: i64,
        dtype: softmax_dtype,
        options: *const softmax_options,
    ) -> softmax_status;

    /// Softmax fused with inverted dropout: `y = keep ? softmax(x) / (1 - p) : 0`; the keep
    /// decision for flat element i is a pure function of (seed, offset, i). `keep_mask` may be
    /// null, else it receives `rows * cols` bytes, 1 where kept.
    pub fn softmax_dropout(
        x: *const c_void,
        y: *mut c_void,
        keep_mask: *mut u8,
        rows: i64,
        cols: i64,
        dtype: softmax_dtype,
        p: f32,
        seed: u64,
        offset: u64,
        options: *const softmax_options,
    ) -> softmax_status;

    /// Gradient of [`softmax_rows`] from its output y: `dx = y * (dy - sum(dy * y))`, or with
    /// [`SOFTMAX_FLAG_LOG`] `dx = dy - exp(y) * sum(dy)`. dx may equal dy.
    pub fn softmax_rows_backward(
        y: *const c_void,
        dy: *const c_void,
        dx: *mut c_void,
        rows: i64,
        cols: i64,
        dtype: softmax_dtype,
        options: *const softmax_options,
    ) -> softmax_status;

    /// Gradient of [`softmax_dropout`] with respect to x, recomputing softmax and mask from x
    /// and (p, seed, offset). dx may equal dy.
    pub fn softmax_dropout_backward(
        x: *const c_void,
        dy: *const c_void,
        dx: *mut c_void,
        rows: i64,
        cols: i64,
        dtype: softmax_dtype,
        p: f32,
        seed: u64,
        offset: u64,
        options: *const softmax_options,
    ) -> softmax_status;

    /// Per-row statistics of one shard of longer rows: `row_max[r] = max x[r, :]`,
    /// `row_sumexp[r] = sum exp(x[r, :] - row_max[r])`. f64 rows are refused.
    pub fn softmax_row_stats(
        x: *const c_void,
        row_max: *mut f32,
        row_sumexp: *mut f32,
        rows: i64,
        cols: i64,
        dtype: softmax_dtype,
        options: *const softmax_options,
    ) -> softmax_status;

    /// A shard's softmax from the merged statistics: `y = exp(x - row_max) / row_sumexp`
    /// ([`SOFTMAX_FLAG_LOG`]: `x - row_max - log(row_sumexp)`).
    pub fn softmax_rows_from_stats(
        x: *const c_void,
        y: *mut c_void,
        row_max: *const f32,
        row_sumexp: *const f32,
        rows: i64,
        cols: i64,
        dtype: softmax_dtype,
        options: *const softmax_options,
    ) -> softmax_status;

    /// A shard's part of the backward's row sums: `row_dot[r] = sum dy[r, :] * y[r, :]`
    /// ([`SOFTMAX_FLAG_LOG`]: `sum dy[r, :]`).
    pub fn softmax_backward_row_stats(
        y: *const c_void,
        dy: *const c_void,
        row_dot: *mut f32,
        rows: i64,
        cols: i64,
        dtype: softmax_dtype,
        options: *const softmax_options,
    ) -> softmax_status;

    /// A shard's gradient from the summed row_dot: `dx = y * (dy - row_dot)`
    /// ([`SOFTMAX_FLAG_LOG`]: `dx = dy - exp(y) * row_dot`).
    pub fn softmax_rows_backward_from_stats(
        y: *const c_void,
        dy: *const c_void,
        dx: *mut c_void,
        row_dot: *const f32,
        rows: i64,
        cols: i64,
        dtype: softmax_dtype,
        options: *const softmax_options,
    ) -> softmax_status;

    /// The defaults, with `struct_size` filled in.
    pub fn softmax_default_options() -> softmax_options;

    /// 1 if the backend can run on this machine now, else 0 (AUTO is always available).
    pub fn softmax_backend_available(backend: softmax_backend) -> c_int;

    /// A static name for a status (`"SOFTMAX_STATUS_INVALID_SIZE"`).
    pub fn softmax_status_string(status: softmax_status) -> *const c_char;

    /// The calling thread's message for its last failed call; `""` after a success. Valid
    /// until this thread's next libsoftmax call.
    pub fn softmax_last_error() -> *const c_char;

    /// `"MAJOR.MINOR.PATCH"` of the library actually loaded.
    pub fn softmax_version() -> *const c_char;
}
