# SPDX-License-Identifier: Apache-2.0
"""softmax.rows and softmax.dropout: C-contiguous [rows, cols] arrays (or one 1-D row) passed to
the library as they are, with no copy; and what the loaded library says about itself."""
from . import _calls
from ._calls import MASK, X, Y, Arg
from ._library import lib


def rows(x, out=None, log=False, *, dtype=None, backend="auto", num_threads=0, stream=None):
    """Row-wise softmax (log-softmax with log=True) of a C-contiguous [rows, cols] array, or of a
    1-D array taken as one row. Returns out, allocated like x when not given; out=x is in place.

    x: numpy array, torch tensor (host or CUDA), cupy array, or anything with
    __array_interface__ / __cuda_array_interface__; float32, float16, bfloat16 or float64.
    dtype: the storage type of the result (a name, numpy or torch dtype); default out's dtype
    when out is given, else x's. Arithmetic is float64 when x or the result is float64.
    On CUDA the call is queued on the array's stream (the interface's "stream" entry; torch's
    current stream for torch tensors) unless stream= (an int cudaStream_t) is given, and returns
    before the kernel has run, as torch and cupy operations do.
    backend: "auto", "cpu" or "cuda". num_threads: CPU threads, 0 = OpenMP's default.
    """
    (y,) = _calls.call(lib.softmax_rows, [Arg("x", x, side=X), Arg("out", out, True, side=Y)],
                       dtype=dtype, log=log, backend=backend, stream=stream,
                       num_threads=num_threads)
    return y


def dropout(x, p, seed, offset=0, out=None, return_mask=False, *, mask=None, dtype=None,
            backend="auto", num_threads=0, stream=None):
    """Softmax fused with inverted dropout: out = keep ? softmax(x) / (1 - p) : 0, per row.

    The keep decision for flat element i is a pure function of (seed, offset, i), the same on
    the CPU and on any GPU. p must lie in [0, 1]. With return_mask=True (or a uint8 array given
    as mask=) returns (out, mask), the mask holding 1 where kept and 0 where dropped.
    Arrays, dtype=, streams and options as for rows().
    """
    scalars = _dropout_scalars(p, seed, offset)
    want_mask = mask is not None or bool(return_mask)
    args = [Arg("x", x, side=X), Arg("out", out, True, side=Y),
            Arg("mask", mask, True, holds=MASK, wanted=want_mask)]
    results = _calls.call(lib.softmax_dropout, args, scalars, dtype=dtype, backend=backend,
                          stream=stream, num_threads=num_threads)
    return tuple(results) if want_mask else results[0]


def _dropout_scalars(p, seed, offset):
    return (_calls.probability(p), _calls.int_in_range(seed, 0, 2**64, "seed"),
            _calls.int_in_range(offset, 0, 2**64, "offset"))


def backend_available(backend):
    """True if the backend ("auto", "cpu", "cuda") can run on this machine now."""
    if backend not in _calls.BACKENDS:
        raise ValueError("backend must be one of %s, got %r" % (sorted(_calls.BACKENDS), backend))
    return lib.softmax_backend_available(_calls.BACKENDS[backend]) != 0


def version():
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return lib.softmax_version().decode()
