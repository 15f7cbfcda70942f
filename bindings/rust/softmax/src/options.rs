// SPDX-License-Identifier: Apache-2.0
//! Options for a call: backend, log-softmax, CPU threads; and the dropout parameters.

use std::os::raw::c_void;

use softmax_sys as sys;

use crate::element::Storage;

/// Which backend runs the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// CUDA when the pointers are device memory, else CPU.
    Auto,
    /// OpenMP over rows and over chunks of long rows.
    Cpu,
    /// Asynchronous on the stream given to the `*_raw` functions.
    Cuda,
}

impl Backend {
    /// The raw `softmax_backend` value.
    pub fn raw(self) -> sys::softmax_backend {
        match self {
            Backend::Auto => sys::SOFTMAX_BACKEND_AUTO,
            Backend::Cpu => sys::SOFTMAX_BACKEND_CPU,
            Backend::Cuda => sys::SOFTMAX_BACKEND_CUDA,
        }
    }
}

/// Per-call options. `Options::default()` is backend `Auto`, plain softmax, OpenMP's default
/// thread count. Values are passed through unchecked: the library validates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Which backend runs the call.
    pub backend: Backend,
    /// Log-softmax: y = x - max - log(sum(exp(x - max))), and its gradient in the backward and
    /// sharded calls. Rejected by the dropout calls.
    pub log: bool,
    /// CPU backend: threads to use, 0 = OpenMP's default. Negative values are an error.
    pub num_threads: i32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            backend: Backend::Auto,
            log: false,
            num_threads: 0,
        }
    }
}

impl Options {
    /// These options with `backend` set.
    pub fn backend(mut self, backend: Backend) -> Options {
        self.backend = backend;
        self
    }
    /// These options with `log` set.
    pub fn log(mut self, log: bool) -> Options {
        self.log = log;
        self
    }
    /// These options with `num_threads` set.
    pub fn num_threads(mut self, n: i32) -> Options {
        self.num_threads = n;
        self
    }

    /// The C struct, starting from the library's own defaults (which fill in struct_size).
    /// SOFTMAX_FLAG_Y_DTYPE is set only when the two sides' storage types differ.
    pub(crate) fn to_c(self, stream: *mut c_void, storage: Storage) -> sys::softmax_options {
        // SAFETY: softmax_default_options has no preconditions.
        let mut o = unsafe { sys::softmax_default_options() };
        o.backend = self.backend.raw();
        o.flags = if self.log { sys::SOFTMAX_FLAG_LOG } else { 0 };
        o.stream = stream;
        o.num_threads = self.num_threads;
        if storage.y != storage.x {
            o.flags |= sys::SOFTMAX_FLAG_Y_DTYPE;
            o.y_dtype = storage.y.raw();
        }
        o
    }
}

/// Inverted dropout fused into the softmax: `y = keep ? softmax(x) / (1 - p) : 0`. The keep
/// decision for flat element i is a pure function of (seed, offset, i), identical on every
/// backend (Philox4x32-10 as cuRAND's device API defines it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dropout {
    /// Drop probability in [0, 1].
    pub p: f32,
    /// Philox key: the same (seed, offset) gives the same mask.
    pub seed: u64,
    /// Philox subsequence offset, e.g. a step counter, so successive calls draw fresh masks.
    pub offset: u64,
}
