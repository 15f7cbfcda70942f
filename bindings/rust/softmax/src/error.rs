// SPDX-License-Identifier: Apache-2.0
//! The error type: the library's status plus the message `softmax_last_error()` gave for it.

use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_int;

use softmax_sys as sys;

/// A failed status from libsoftmax (or from this crate's own slice-length checks, which reuse
/// the library's size statuses).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// A required pointer was NULL.
    NullPointer,
    /// A size is negative, or a slice's length is not what rows and cols say.
    InvalidSize,
    /// rows * cols * element size does not fit.
    SizeOverflow,
    /// A storage type the library or the function does not take.
    InvalidDtype,
    /// A backend value the library does not know, or `Cuda` for borrowed slices.
    InvalidBackend,
    /// Bad options, e.g. log-softmax for dropout or a negative thread count.
    InvalidOptions,
    /// The dropout p is NaN or outside [0, 1].
    InvalidProbability,
    /// Arrays partially overlap.
    OverlappingBuffers,
    /// The backend cannot run on this machine now.
    BackendUnavailable,
    /// Host memory given to CUDA, device memory to the CPU, or mixed.
    WrongMemorySpace,
    /// A CUDA call or kernel launch failed.
    CudaError,
    /// Workspace could not be allocated.
    OutOfMemory,
    /// A bug in libsoftmax.
    InternalError,
    /// A status code newer than this crate (the C enum is append-only).
    Unknown(i32),
}

impl Status {
    /// The failure status for a raw code; `None` for `SOFTMAX_STATUS_SUCCESS`.
    pub fn from_raw(code: c_int) -> Option<Status> {
        Some(match code {
            sys::SOFTMAX_STATUS_SUCCESS => return None,
            sys::SOFTMAX_STATUS_NULL_POINTER => Status::NullPointer,
            sys::SOFTMAX_STATUS_INVALID_SIZE => Status::InvalidSize,
            sys::SOFTMAX_STATUS_SIZE_OVERFLOW => Status::SizeOverflow,
            sys::SOFTMAX_STATUS_INVALID_DTYPE => Status::InvalidDtype,
            sys::SOFTMAX_STATUS_INVALID_BACKEND => Status::InvalidBackend,
            sys::SOFTMAX_STATUS_INVALID_OPTIONS => Status::InvalidOptions,
            sys::SOFTMAX_STATUS_INVALID_PROBABILITY => Status::InvalidProbability,
            sys::SOFTMAX_STATUS_OVERLAPPING_BUFFERS => Status::OverlappingBuffers,
            sys::SOFTMAX_STATUS_BACKEND_UNAVAILABLE => Status::BackendUnavailable,
            sys::SOFTMAX_STATUS_WRONG_MEMORY_SPACE => Status::WrongMemorySpace,
            sys::SOFTMAX_STATUS_CUDA_ERROR => Status::CudaError,
            sys::SOFTMAX_STATUS_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::SOFTMAX_STATUS_INTERNAL_ERROR => Status::InternalError,
            other => Status::Unknown(other),
        })
    }

    /// The raw `softmax_status` value.
    pub fn raw(self) -> c_int {
        match self {
            Status::NullPointer => sys::SOFTMAX_STATUS_NULL_POINTER,
            Status::InvalidSize => sys::SOFTMAX_STATUS_INVALID_SIZE,
            Status::SizeOverflow => sys::SOFTMAX_STATUS_SIZE_OVERFLOW,
            Status::InvalidDtype => sys::SOFTMAX_STATUS_INVALID_DTYPE,
            Status::InvalidBackend => sys::SOFTMAX_STATUS_INVALID_BACKEND,
            Status::InvalidOptions => sys::SOFTMAX_STATUS_INVALID_OPTIONS,
            Status::InvalidProbability => sys::SOFTMAX_STATUS_INVALID_PROBABILITY,
            Status::OverlappingBuffers => sys::SOFTMAX_STATUS_OVERLAPPING_BUFFERS,
            Status::BackendUnavailable => sys::SOFTMAX_STATUS_BACKEND_UNAVAILABLE,
            Status::WrongMemorySpace => sys::SOFTMAX_STATUS_WRONG_MEMORY_SPACE,
            Status::CudaError => sys::SOFTMAX_STATUS_CUDA_ERROR,
            Status::OutOfMemory => sys::SOFTMAX_STATUS_OUT_OF_MEMORY,
            Status::InternalError => sys::SOFTMAX_STATUS_INTERNAL_ERROR,
            Status::Unknown(code) => code,
        }
    }

    /// The library's name for the status, e.g. `"SOFTMAX_STATUS_INVALID_SIZE"`.
    pub fn name(self) -> &'static str {
        // SAFETY: softmax_status_string returns a static NUL-terminated string for any value.
        let name = unsafe { CStr::from_ptr(sys::softmax_status_string(self.raw())) };
        name.to_str().unwrap_or("SOFTMAX_STATUS_<non-UTF-8 name>")
    }
}

/// What went wrong: the status and the library's message for it (or, for a slice-length
/// mismatch caught before the call, this crate's message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    /// The failed status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// `softmax_last_error()` at the time of the failure, e.g. "cols must be > 0, got -3".
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn new(status: Status, message: String) -> Error {
        Error { status, message }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// Turns a returned status into a `Result`, reading the thread's last-error message right away
/// (it is only valid until this thread's next libsoftmax call).
pub(crate) fn check(code: c_int) -> Result<(), Error> {
    match Status::from_raw(code) {
        None => Ok(()),
        Some(status) => {
            // SAFETY: softmax_last_error returns a valid NUL-terminated thread-local string.
            let message = unsafe { CStr::from_ptr(sys::softmax_last_error()) };
            Err(Error::new(status, message.to_string_lossy().into_owned()))
        }
    }
}
