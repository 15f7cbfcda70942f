//! Raw declarations of libsoftmax's C ABI, written by hand from `include/softmax/softmax.h`.
//!
//! Everything here is `unsafe` to call and mirrors the header one to one; the safe API lives in
//! the `softmax` crate. C enums are declared as `c_int` type aliases with constants rather than
//! Rust enums, because a future library may return a value this crate does not know, and an
//! unknown discriminant in a Rust enum would be undefined behaviour.
//!
//! The test `tests/abi.rs` checks the constants against the library's own status names and the
//! layout of [`softmax_options`] against a C program compiled from the header.

#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_void};

pub const SOFTMAX_VERSION_MAJOR: u32 = 0;
pub const SOFTMAX_VERSION_MINOR: u32 = 2;
pub const SOFTMAX_VERSION_PATCH: u32 = 0;

/// `softmax_status`: values are part of the ABI and only ever appended.
pub type softmax_status = c_int;
pub const SOFTMAX_STATUS_SUCCESS: softmax_status = 0;
pub const SOFTMAX_STATUS_NULL_POINTER: softmax_status = 1;
pub const SOFTMAX_STATUS_INVALID_SIZE: softmax_status = 2;
pub const SOFTMAX_STATUS_SIZE_OVERFLOW: softmax_status = 3;
pub const SOFTMAX_STATUS_INVALID_DTYPE: softmax_status = 4;
pub const SOFTMAX_STATUS_INVALID_BACKEND: softmax_status = 5;
pub const SOFTMAX_STATUS_INVALID_OPTIONS: softmax_status = 6;
pub const SOFTMAX_STATUS_INVALID_PROBABILITY: softmax_status = 7;
pub const SOFTMAX_STATUS_OVERLAPPING_BUFFERS: softmax_status = 8;
pub const SOFTMAX_STATUS_BACKEND_UNAVAILABLE: softmax_status = 9;
pub const SOFTMAX_STATUS_WRONG_MEMORY_SPACE: softmax_status = 10;
pub const SOFTMAX_STATUS_CUDA_ERROR: softmax_status = 11;
pub const SOFTMAX_STATUS_OUT_OF_MEMORY: softmax_status = 12;
pub const SOFTMAX_STATUS_INTERNAL_ERROR: softmax_status = 13;

/// `softmax_dtype`: storage type of x and y.
pub type softmax_dtype = c_int;
pub const SOFTMAX_DTYPE_F32: softmax_dtype = 0;
pub const SOFTMAX_DTYPE_F16: softmax_dtype = 1;
pub const SOFTMAX_DTYPE_BF16: softmax_dtype = 2;

/// `softmax_backend`.
pub type softmax_backend = c_int;
pub const SOFTMAX_BACKEND_AUTO: softmax_backend = 0;
pub const SOFTMAX_BACKEND_CPU: softmax_backend = 1;
pub const SOFTMAX_BACKEND_CUDA: softmax_backend = 2;

/// Bit of `softmax_options::flags`: log-softmax in `softmax_rows`.
pub const SOFTMAX_FLAG_LOG: u32 = 0x1;

/// `softmax_options`. Set `struct_size` to `size_of::<softmax_options>()`, or start from
/// [`softmax_default_options`], which fills it in.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct softmax_options {
    pub struct_size: usize,
    pub backend: softmax_backend,
    pub flags: u32,
    /// `cudaStream_t` for the CUDA backend; null is the legacy default stream.
    pub stream: *mut c_void,
    /// CPU backend: threads to use, 0 = OpenMP's default.
    pub num_threads: i32,
}

extern "C" {
    pub fn softmax_rows(
        x: *const c_void,
        y: *mut c_void,
        rows: i64,
        cols: i64,
        dtype: softmax_dtype,
        options: *const softmax_options,
    ) -> softmax_status;

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

    pub fn softmax_default_options() -> softmax_options;

    pub fn softmax_backend_available(backend: softmax_backend) -> c_int;

    pub fn softmax_status_string(status: softmax_status) -> *const c_char;

    pub fn softmax_last_error() -> *const c_char;

    pub fn softmax_version() -> *const c_char;
}
