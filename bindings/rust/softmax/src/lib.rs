// SPDX-License-Identifier: Apache-2.0
//! Safe Rust API over libsoftmax: row-wise softmax, log-softmax, fused softmax+dropout, their
//! gradients and the sharded-row helpers, on row-major `rows x cols` matrices of `f32`, `f64`,
//! fp16 or bf16, on the CPU or a CUDA GPU.
//!
//! This crate holds no numerics of its own: each function checks that the slices hold
//! `rows * cols` elements (`rows` for per-row statistics), calls the C function, and turns a
//! failed status into an [`Error`] that carries the status and `softmax_last_error()`'s message.
//! Empty slices (rows or cols 0) are fine. The functions are generic over the element types:
//! a result may be stored in another type than its input (`f32` in, [`Bf16`] out), and the
//! backward functions take the forward's types (y and dy as its result, dx as its input).
//!
//! ```
//! let x = vec![1.0f32, 2.0, 3.0, 4.0, 0.0, 0.0];
//! let mut y = vec![0.0f32; 6];
//! softmax::rows(&x, &mut y, 2, 3, &softmax::Options::default()).unwrap();
//! assert!((y[3] + y[4] + y[5] - 1.0).abs() < 1e-6);
//! ```
//!
//! Device memory and CUDA streams go through the `unsafe` functions of [`raw`].

#![deny(missing_docs)]

mod backward;
mod checks;
mod element;
mod error;
mod options;
pub mod raw;
mod sharded;
mod slices;

use std::ffi::CStr;

use softmax_sys as sys;

pub use backward::{
    dropout_backward, dropout_backward_in_place, rows_backward, rows_backward_in_place,
};
pub use element::{Bf16, Dtype, Element, Storage, F16};
pub use error::{Error, Status};
pub use options::{Backend, Dropout, Options};
pub use raw::{dropout_raw, rows_raw};
pub use sharded::{backward_row_stats, row_stats, rows_backward_from_stats, rows_from_stats};
pub use slices::{dropout, dropout_in_place, rows, rows_in_place};

/// The version of the library actually loaded, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    // SAFETY: softmax_version returns a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(sys::softmax_version()) };
    v.to_str().unwrap_or("<non-UTF-8 version>")
}

/// Whether the backend can run on this machine now (`Auto` always can).
pub fn backend_available(backend: Backend) -> bool {
    // SAFETY: no preconditions; unknown values are answered with 0.
    unsafe { sys::softmax_backend_available(backend.raw()) != 0 }
}
