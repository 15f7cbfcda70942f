# SPDX-License-Identifier: Apache-2.0
"""The numpy-style functions: any array shape, softmax along `axis`, arrays of any strides.

Each moves `axis` last and hands the library contiguous [rows, cols] data, copying only an array
that is not already laid out that way (and writing `out` through a temporary only when its moved
view is not contiguous). Arrays are numpy, cupy or torch arrays (host or CUDA); results are of
the same kind, on the same device, with x's shape: for an axis other than the last, a view with
the axis moved back. Empty arrays give empty results.

dtype= is the storage type of the result (a name such as "bfloat16", a numpy dtype or a torch
dtype); the default is that of the array the result mirrors. Arithmetic is float64 when any
array is float64, float32 otherwise. Every function also takes backend= ("auto", "cpu",
"cuda"), num_threads= (CPU threads, 0 = OpenMP's default) and stream= (an int cudaStream_t;
default: the array's stream, torch's current stream for torch tensors) as keywords.
"""
from . import _calls
from ._api import _dropout_scalars
from ._calls import MASK, STATS, X, Y, Arg
from ._library import lib


def softmax(x, axis=-1, dtype=None, *, out=None, **options):
    """softmax along axis: exp(x - max) / sum(exp(x - max))."""
    return _forward(x, axis, dtype, out, False, options)


def log_softmax(x, axis=-1, dtype=None, *, out=None, **options):
    """log-softmax along axis: x - max - log(sum(exp(x - max)))."""
    return _forward(x, axis, dtype, out, True, options)


def _forward(x, axis, dtype, out, log, options):
    (y,) = _calls.call(lib.softmax_rows, [Arg("x", x, side=X), Arg("out", out, True, side=Y)],
                       axis=axis, dtype=dtype, log=log, **options)
    return y


def softmax_dropout(x, p, seed, offset=0, axis=-1, dtype=None, *, out=None, return_mask=False,
                    **options):
    """softmax along axis fused with inverted dropout: keep ? softmax(x) / (1 - p) : 0.

    The keep decision for element i of the [rows, cols] layout (axis moved last, flattened) is
    a pure function of (seed, offset, i), as in softmax.dropout. With return_mask=True returns
    (y, mask), mask holding 1 where kept and 0 where dropped, with x's shape.
    """
    args = [Arg("x", x, side=X), Arg("out", out, True, side=Y),
            Arg("mask", None, True, holds=MASK, wanted=bool(return_mask))]
    results = _calls.call(lib.softmax_dropout, args, _dropout_scalars(p, seed, offset),
                          axis=axis, dtype=dtype, **options)
    return tuple(results) if return_mask else results[0]


def softmax_backward(y, dy, log=False, out=None, dtype=None, *, axis=-1, **options):
    """Gradient of softmax (log=True: of log_softmax) along axis, from its output y and the
    incoming gradient dy: dx = y * (dy - sum(dy * y)), or dy - exp(y) * sum(dy) with log=True.

    y and dy share one dtype (the forward result's); dtype= is dx's, by default y's (pass the
    forward input's dtype for mixed-precision training). out=dy computes in place.
    """
    (dx,) = _calls.call(lib.softmax_rows_backward,
                        [Arg("y", y, side=Y), Arg("dy", dy, side=Y), Arg("out", out, True, side=X)],
                        axis=axis, dtype=dtype, log=log, **options)
    return dx


def dropout_backward(x, dy, p, seed, offset=0, out=None, dtype=None, *, axis=-1, **options):
    """Gradient of softmax_dropout with respect to x, recomputed from x and the same
    (p, seed, offset): no mask or activation has to be kept from the forward call.

    dx is stored as x, so dtype= (kept for symmetry with softmax_backward) may only name x's
    dtype; dy may be stored as another type (the forward result's).
    """
    (dx,) = _calls.call(lib.softmax_dropout_backward,
                        [Arg("x", x, side=X), Arg("dy", dy, side=Y), Arg("out", out, True, side=X)],
                        _dropout_scalars(p, seed, offset), axis=axis, dtype=dtype, **options)
    return dx


def row_stats(x, *, axis=-1, **options):
    """Per-row statistics of one shard of longer rows: (row_max, row_sumexp), float32 arrays of
    x's shape without axis: row_max = max(x), row_sumexp = sum(exp(x - row_max)).

    Merge shards with M = max of the shard maxima and S = sum(row_sumexp * exp(shard max - M))
    (terms with row_sumexp == 0 left out), then call rows_from_stats(x, M, S) on every shard.
    float64 x is refused by the library: float statistics cannot carry its range.
    """
    return tuple(_calls.call(lib.softmax_row_stats,
                             [Arg("x", x, side=X), Arg("row_max", None, True, holds=STATS),
                              Arg("row_sumexp", None, True, holds=STATS)],
                             axis=axis, **options))


def rows_from_stats(x, row_max, row_sumexp, log=False, dtype=None, *, out=None, axis=-1,
                    **options):
    """This shard's softmax from the merged statistics: exp(x - row_max) / row_sumexp (log=True:
    x - row_max - log(row_sumexp)). row_max and row_sumexp are float32 arrays of x's shape
    without axis."""
    (y,) = _calls.call(lib.softmax_rows_from_stats,
                       [Arg("x", x, side=X), Arg("out", out, True, side=Y),
                        Arg("row_max", row_max, holds=STATS),
                        Arg("row_sumexp", row_sumexp, holds=STATS)],
                       axis=axis, dtype=dtype, log=log, **options)
    return y


def backward_row_stats(y, dy, log=False, *, axis=-1, **options):
    """This shard's part of the backward's row sums, a float32 array of y's shape without axis:
    sum(dy * y) (log=True: sum(dy)). Sum it over the shards, then rows_backward_from_stats."""
    (row_dot,) = _calls.call(lib.softmax_backward_row_stats,
                             [Arg("y", y, side=Y), Arg("dy", dy, side=Y),
                              Arg("row_dot", None, True, holds=STATS)],
                             axis=axis, log=log, **options)
    return row_dot


def rows_backward_from_stats(y, dy, row_dot, log=False, *, out=None, dtype=None, axis=-1,
                             **options):
    """This shard's gradient from the summed row_dot: dx = y * (dy - row_dot) (log=True:
    dy - exp(y) * row_dot). dtype= is dx's, by default y's."""
    (dx,) = _calls.call(lib.softmax_rows_backward_from_stats,
                        [Arg("y", y, side=Y), Arg("dy", dy, side=Y), Arg("out", out, True, side=X),
                         Arg("row_dot", row_dot, holds=STATS)],
                        axis=axis, dtype=dtype, log=log, **options)
    return dx
