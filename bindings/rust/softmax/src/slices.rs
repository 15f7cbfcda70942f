//! The safe API: host slices in, `Result` out. The only checks made here are the ones the C
//! library cannot make for itself: that each slice holds exactly rows * cols elements and that
//! the sizes fit the C types, and that the call is synchronous (see [`sync_backend`]). Everything
//! else is the library's to judge.

use std::os::raw::c_void;
use std::ptr;

use softmax_sys as sys;

use crate::element::Element;
use crate::error::{check, Error, Status};
use crate::options::{Backend, Dropout, Options};

/// y[r, :] = softmax(x[r, :]) for each row of the row-major `rows x cols` matrix x
/// (log-softmax with `options.log`). x and y must each hold exactly rows * cols elements.
pub fn rows<T: Element>(
    x: &[T],
    y: &mut [T],
    rows: usize,
    cols: usize,
    options: &Options,
) -> Result<(), Error> {
    let (r, c) = shape(rows, cols, &[("x", x.len()), ("y", y.len())])?;
    let o = sync_backend(options)?.to_c(ptr::null_mut());
    // SAFETY: both slices hold rows * cols elements of T::DTYPE and do not overlap (&/&mut).
    check(unsafe {
        sys::softmax_rows(
            x.as_ptr() as *const c_void,
            y.as_mut_ptr() as *mut c_void,
            r,
            c,
            T::DTYPE.raw(),
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
    let (r, c) = shape(rows, cols, &[("xy", xy.len())])?;
    let o = sync_backend(options)?.to_c(ptr::null_mut());
    let p = xy.as_mut_ptr() as *mut c_void;
    // SAFETY: the slice holds rows * cols elements; x == y is the library's in-place mode.
    check(unsafe { sys::softmax_rows(p as *const c_void, p, r, c, T::DTYPE.raw(), &o) })
}

/// Softmax fused with inverted dropout: y = keep ? softmax(x) / (1 - p) : 0. If `keep_mask` is
/// given it receives rows * cols bytes, 1 where kept and 0 where dropped.
pub fn dropout<T: Element>(
    x: &[T],
    y: &mut [T],
    keep_mask: Option<&mut [u8]>,
    rows: usize,
    cols: usize,
    dropout: Dropout,
    options: &Options,
) -> Result<(), Error> {
    let lens = [("x", x.len()), ("y", y.len())];
    // SAFETY: x and y are slices of T, distinct (&/&mut); their lengths go to the check.
    unsafe {
        dropout_checked::<T>(
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
    let lens = [("xy", xy.len())];
    let p = xy.as_mut_ptr() as *mut c_void;
    // SAFETY: one slice of T as both x and y: the library's in-place mode.
    unsafe { dropout_checked::<T>(p as *const c_void, p, &lens, keep_mask, rows, cols, dropout, options) }
}

/// The call behind [`dropout`] and [`dropout_in_place`]: checks that the buffers in `lens` and
/// the mask hold rows * cols elements, then calls the library.
///
/// # Safety
/// `x` and `y` point to slices of `T` whose lengths are in `lens`, either distinct or equal.
#[allow(clippy::too_many_arguments)]
unsafe fn dropout_checked<T: Element>(
    x: *const c_void,
    y: *mut c_void,
    lens: &[(&str, usize)],
    keep_mask: Option<&mut [u8]>,
    rows: usize,
    cols: usize,
    dropout: Dropout,
    options: &Options,
) -> Result<(), Error> {
    let mut all = lens.to_vec();
    if let Some(m) = keep_mask.as_ref() {
        all.push(("keep_mask", m.len()));
    }
    let (r, c) = shape(rows, cols, &all)?;
    let o = sync_backend(options)?.to_c(ptr::null_mut());
    let mask = keep_mask.map_or(ptr::null_mut(), |m| m.as_mut_ptr());
    // SAFETY: every buffer holds rows * cols elements (checked above); the caller vouches for
    // x and y, and the mask is its own &mut slice.
    check(sys::softmax_dropout(
        x,
        y,
        mask,
        r,
        c,
        T::DTYPE.raw(),
        dropout.p,
        dropout.seed,
        dropout.offset,
        &o,
    ))
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
             unsafe rows_raw/dropout_raw with device pointers and synchronise the stream"
                .to_string(),
        ));
    }
    Ok(options)
}

/// Checks that every buffer holds exactly rows * cols elements and converts the sizes to the
/// C API's int64_t. rows == 0 or cols == 0 pass through: the library reports those itself.
fn shape(rows: usize, cols: usize, buffers: &[(&str, usize)]) -> Result<(i64, i64), Error> {
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
    for &(name, len) in buffers {
        if len != n {
            return Err(Error::new(
                Status::InvalidSize,
                format!(
                    "{} has {} elements but rows * cols = {} * {} = {}",
                    name, len, rows, cols, n
                ),
            ));
        }
    }
    Ok((r, c))
}
