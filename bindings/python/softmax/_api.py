"""softmax.rows and softmax.dropout: array objects in, C call, array out.

The only checks made here are those the C library cannot make: that the arrays are arrays of a
supported dtype and layout, that out and x agree in shape and dtype, that out is writable, and
that integers fit their C types (ctypes would wrap them silently). Sizes, p, options, overlap and
memory spaces are the library's to judge; its complaints arrive as SoftmaxError.
"""
import ctypes
import operator

from . import _arrays
from ._errors import check
from ._library import lib

BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}
FLAG_LOG = 0x1


def _int_in_range(value, lo, hi, what):
    try:
        value = operator.index(value)  # int, numpy integers; not float
    except TypeError:
        raise TypeError("%s must be an integer, got %s" % (what, type(value).__name__)) from None
    if not lo <= value < hi:
        raise ValueError("%s must lie in [%d, %d), got %d" % (what, lo, hi, value))
    return value


def _options(backend, flags, stream, num_threads, views):
    """The C options; backend "auto" becomes "cuda" when an array says it is device memory, so
    that a library without CUDA refuses the call instead of reading device pointers."""
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ValueError("backend must be one of %s, got %r" % (sorted(BACKENDS), backend))
        code = BACKENDS[backend]
    else:
        code = _int_in_range(backend, -2**31, 2**31, "backend")  # passed on; the library judges
    if code == BACKENDS["auto"] and any(v.cuda for v in views):
        code = BACKENDS["cuda"]
    if stream is None:
        stream = next((v.stream for v in views if v.stream is not None), None)
    o = lib.softmax_default_options()
    o.backend = code
    o.flags = flags
    o.stream = _int_in_range(stream, 0, 2**64, "stream") if stream is not None else None
    o.num_threads = _int_in_range(num_threads, -2**31, 2**31, "num_threads")
    return o


def _output(x, out, what):
    """The view of out (allocated like x when None), checked against x."""
    if out is None:
        out = _arrays.empty_like(x)
    v = _arrays.describe(out, what)
    if v.shape != x.shape:
        raise ValueError("%s has shape %s but x has shape %s" % (what, v.shape, x.shape))
    if v.dtype != x.dtype:
        raise ValueError("%s has dtype %s but x has dtype %s"
                         % (what, _arrays.DTYPE_NAMES[v.dtype], _arrays.DTYPE_NAMES[x.dtype]))
    if v.readonly:
        raise ValueError("%s is read-only" % what)
    return v


def rows(x, out=None, log=False, *, backend="auto", num_threads=0, stream=None):
    """Row-wise softmax (log-softmax with log=True) of a C-contiguous [rows, cols] array, or of a
    1-D array taken as one row. Returns out, allocated like x when not given; out=x is in place.

    x: numpy array, torch tensor (host or CUDA), cupy array, or anything with
    __array_interface__ / __cuda_array_interface__; float32, float16 or bfloat16.
    On CUDA the call is queued on the array's stream (the interface's "stream" entry; torch's
    current stream for torch tensors) unless stream= (an int cudaStream_t) is given, and returns
    before the kernel has run, as torch and cupy operations do.
    backend: "auto", "cpu" or "cuda". num_threads: CPU threads, 0 = OpenMP's default.
    """
    xv = _arrays.describe(x, "x")
    ov = _output(xv, out, "out")
    o = _options(backend, FLAG_LOG if log else 0, stream, num_threads, [xv, ov])
    check(lib.softmax_rows(xv.ptr, ov.ptr, xv.rows, xv.cols, xv.dtype, ctypes.byref(o)))
    return ov.obj


def dropout(x, p, seed, offset=0, out=None, return_mask=False, *, mask=None, backend="auto",
            num_threads=0, stream=None):
    """Softmax fused with inverted dropout: out = keep ? softmax(x) / (1 - p) : 0, per row.

    The keep decision for flat element i is a pure function of (seed, offset, i), the same on
    the CPU and on any GPU. p must lie in [0, 1]. With return_mask=True (or a uint8 array given
    as mask=) returns (out, mask), the mask holding 1 where kept and 0 where dropped.
    Arrays, streams and options as for rows().
    """
    xv = _arrays.describe(x, "x")
    ov = _output(xv, out, "out")
    mv = None
    if mask is not None or return_mask:
        m = mask if mask is not None else _arrays.empty_like(xv, uint8=True)
        mv = _arrays.describe(m, "mask", mask=True)
        if mv.shape != xv.shape:
            raise ValueError("mask has shape %s but x has shape %s" % (mv.shape, xv.shape))
        if mv.readonly:
            raise ValueError("mask is read-only")
    seed = _int_in_range(seed, 0, 2**64, "seed")
    offset = _int_in_range(offset, 0, 2**64, "offset")
    views = [xv, ov] + ([mv] if mv is not None else [])
    o = _options(backend, 0, stream, num_threads, views)
    check(lib.softmax_dropout(xv.ptr, ov.ptr, mv.ptr if mv is not None else None, xv.rows,
                              xv.cols, xv.dtype, float(p), seed, offset, ctypes.byref(o)))
    return (ov.obj, mv.obj) if mv is not None else ov.obj


def backend_available(backend):
    """True if the backend ("auto", "cpu", "cuda") can run on this machine now."""
    if backend not in BACKENDS:
        raise ValueError("backend must be one of %s, got %r" % (sorted(BACKENDS), backend))
    return lib.softmax_backend_available(BACKENDS[backend]) != 0


def version():
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return lib.softmax_version().decode()
