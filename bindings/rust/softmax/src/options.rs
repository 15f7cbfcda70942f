//! Options for a call: backend, log-softmax, CPU threads; and the dropout parameters.

use std::os::raw::c_void;

use softmax_sys as sys;

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
    pub backend: Backend,
    /// `softmax_rows` only: y = x - max - log(sum(exp(x - max))). Rejected by dropout.
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
    pub fn backend(mut self, backend: Backend) -> Options {
        self.backend = backend;
        self
    }
    pub fn log(mut self, log: bool) -> Options {
        self.log = log;
        self
    }
    pub fn num_threads(mut self, n: i32) -> Options {
        self.num_threads = n;
        self
    }

    /// The C struct, starting from the library's own defaults (which fill in struct_size).
    pub(crate) fn to_c(self, stream: *mut c_void) -> sys::softmax_options {
        // SAFETY: softmax_default_options has no preconditions.
        let mut o = unsafe { sys::softmax_default_options() };
        o.backend = self.backend.raw();
        o.flags = if self.log { sys::SOFTMAX_FLAG_LOG } else { 0 };
        o.stream = stream;
        o.num_threads = self.num_threads;
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
    pub seed: u64,
    /// Philox subsequence offset, e.g. a step counter, so successive calls draw fresh masks.
    pub offset: u64,
}
