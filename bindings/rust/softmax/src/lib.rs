//! Safe Rust API over libsoftmax: row-wise softmax, log-softmax and fused softmax+dropout on
//! row-major `rows x cols` matrices of `f32`, fp16 or bf16, on the CPU or a CUDA GPU.
//!
//! This crate holds no numerics of its own: each function checks that the slices hold
//! `rows * cols` elements, calls the C function, and turns a failed status into an [`Error`]
//! that carries the status and `softmax_last_error()`'s message.
//!
//! ```
//! let x = vec![1.0f32, 2.0, 3.0, 4.0, 0.0, 0.0];
//! let mut y = vec![0.0f32; 6];
//! softmax::rows(&x, &mut y, 2, 3, &softmax::Options::default()).unwrap();
//! assert!((y[3] + y[4] + y[5] - 1.0).abs() < 1e-6);
//! ```
//!
//! Device memory and CUDA streams go through the `unsafe` [`rows_raw`] and [`dropout_raw`].

mod element;
mod error;
mod options;
mod raw;
mod slices;

use std::ffi::CStr;

use softmax_sys as sys;

pub use element::{Bf16, Dtype, Element, F16};
pub use error::{Error, Status};
pub use options::{Backend, Dropout, Options};
pub use raw::{dropout_raw, rows_raw};
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
