//! Pointer-level calls, for device memory and CUDA streams: the library is handed exactly what
//! it is given, and sizes are the C API's signed integers so that it judges them itself.

use std::os::raw::c_void;

use softmax_sys as sys;

use crate::element::Dtype;
use crate::error::{check, Error};
use crate::options::{Dropout, Options};

/// `softmax_rows` on raw pointers, e.g. CUDA device memory with `Backend::Cuda` (or `Auto`,
/// which picks CUDA for device pointers).
///
/// On the CUDA backend the call is asynchronous: `Ok` means the work was queued on `stream`,
/// not that it has finished; synchronise the stream before reading y on the host.
///
/// # Safety
///
/// - `x` and `y` must each point to `rows * cols` elements of `dtype` that stay valid (and, for
///   `y`, unaliased by anything else that reads or writes them) until the work has finished:
///   on the CPU backend, until this function returns; on the CUDA backend, until `stream`
///   has executed it. `x == y` (in place) is allowed.
/// - Memory must be reachable by the chosen backend: host memory for the CPU, device, managed
///   or pinned memory for CUDA (the library checks this where the CUDA driver can tell).
/// - `stream` must be null (the legacy default stream) or a live `cudaStream_t` of the current
///   device; it is ignored by the CPU backend.
pub unsafe fn rows_raw(
    x: *const c_void,
    y: *mut c_void,
    rows: i64,
    cols: i64,
    dtype: Dtype,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let o = options.to_c(stream);
    check(sys::softmax_rows(x, y, rows, cols, dtype.raw(), &o))
}

/// `softmax_dropout` on raw pointers; `keep_mask` may be null (no mask written) or point to
/// `rows * cols` bytes in the same memory space as y.
///
/// # Safety
///
/// As for [`rows_raw`], and `keep_mask`, when not null, must satisfy the same conditions as `y`
/// for `rows * cols` bytes and must not overlap x or y.
#[allow(clippy::too_many_arguments)]
pub unsafe fn dropout_raw(
    x: *const c_void,
    y: *mut c_void,
    keep_mask: *mut u8,
    rows: i64,
    cols: i64,
    dtype: Dtype,
    dropout: Dropout,
    options: &Options,
    stream: *mut c_void,
) -> Result<(), Error> {
    let o = options.to_c(stream);
    check(sys::softmax_dropout(
        x,
        y,
        keep_mask,
        rows,
        cols,
        dtype.raw(),
        dropout.p,
        dropout.seed,
        dropout.offset,
        &o,
    ))
}
