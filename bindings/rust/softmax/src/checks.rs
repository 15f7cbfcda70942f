// SPDX-License-Identifier: Apache-2.0
//! The only checks the safe API makes itself, those the C library cannot make: that each slice
//! holds exactly as many elements as rows and cols say, that the sizes fit the C types, and that
//! the call is synchronous (see [`sync_options`]). Everything else is the library's to judge.

use std::os::raw::c_void;
use std::ptr;

use softmax_sys as sys;

use crate::element::Storage;
use crate::error::{Error, Status};
use crate::options::{Backend, Options};

/// How many elements a slice must hold.
#[derive(Clone, Copy)]
pub(crate) enum Extent {
    /// rows * cols: a matrix (x, y, dy, dx, keep_mask).
    Matrix,
    /// rows: per-row statistics.
    PerRow,
}

/// One slice argument: its name for messages, its length, and what that length must be.
pub(crate) type Slice<'a> = (&'a str, usize, Extent);

/// The C options for a slice call: `Backend::Cuda` refused, no stream.
pub(crate) fn sync_options(
    options: &Options,
    storage: Storage,
) -> Result<sys::softmax_options, Error> {
    Ok(sync_backend(options)?.to_c(ptr::null_mut::<c_void>(), storage))
}

/// Borrowed slices must not be written after the borrow ends, but a CUDA-backend call returns
/// before its kernel has run (and CUDA can reach pinned or managed host memory). So the slice
/// functions refuse `Backend::Cuda`; `Auto` is fine, since it picks CUDA only for device
/// pointers, which a Rust slice cannot be.
fn sync_backend(options: &Options) -> Result<&Options, Error> {
    if options.backend == Backend::Cuda {
        return Err(Error::new(
            Status::InvalidBackend,
            "Backend::Cuda runs asynchronously and cannot be given borrowed slices; use the \
             unsafe *_raw functions with device pointers and synchronise the stream"
                .to_string(),
        ));
    }
    Ok(options)
}

/// Checks that every slice holds the elements its extent says and converts the sizes to the C
/// API's int64_t. rows == 0 or cols == 0 (empty slices) pass: the library accepts them too.
pub(crate) fn shape(rows: usize, cols: usize, slices: &[Slice]) -> Result<(i64, i64), Error> {
    let too_big = |what: &str, v: usize| {
        Error::new(
            Status::SizeOverflow,
            format!("{} = {} does not fit in int64_t", what, v),
        )
    };
    let r = i64::try_from(rows).map_err(|_| too_big("rows", rows))?;
    let c = i64::try_from(cols).map_err(|_| too_big("cols", cols))?;
    let n = rows.checked_mul(cols).ok_or_else(|| {
        Error::new(
            Status::SizeOverflow,
            format!("rows * cols = {} * {} overflows usize", rows, cols),
        )
    })?;
    for &(name, len, extent) in slices {
        let (want, what) = match extent {
            Extent::Matrix => (n, format!("rows * cols = {} * {} = {}", rows, cols, n)),
            Extent::PerRow => (rows, format!("rows = {}", rows)),
        };
        if len != want {
            return Err(Error::new(
                Status::InvalidSize,
                format!("{} has {} elements but {}", name, len, what),
            ));
        }
    }
    Ok((r, c))
}
