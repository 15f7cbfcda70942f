# SPDX-License-Identifier: Apache-2.0
"""One C call from Python arguments: arrays to pointers, storage types to (dtype, y_dtype),
options to the C struct, the status to an exception.

Each C function's arrays are described by Arg records in C argument order. An array mirrors
either the forward call's x (its storage type is the C `dtype`) or its y (stored as
options->y_dtype), or it is a keep-mask (uint8) or per-row statistics (float32). The only checks
made here are those the library cannot make: that the arguments are arrays of a supported dtype
and layout, that their shapes and the dtypes of arrays mirroring the same side agree, that
outputs are writable, and that integers fit their C types (ctypes would wrap them silently).
Sizes, p, options, overlap and memory spaces are the library's to judge; its complaints arrive
as SoftmaxError.
"""
import ctypes
import numbers
import operator

from . import _arrays, _dtypes
from ._errors import check
from ._layout import AxisLayout, as_array, ops_for
from ._library import lib

BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}
FLAG_LOG = 0x1
FLAG_Y_DTYPE = 0x2

X, Y = "x", "y"  # the side of the forward call an array mirrors
ROWS, MASK, STATS = "rows", "mask", "stats"  # what an array holds


class Arg:
    """One array argument of a C call, in C argument order. `value` is the caller's object
    (None: allocate one, for an output); `wanted=False` passes NULL (an optional output not
    asked for)."""

    __slots__ = ("name", "value", "output", "holds", "side", "wanted", "dtype", "view", "finish")

    def __init__(self, name, value, output=False, holds=ROWS, side=None, wanted=True):
        self.name, self.value, self.output, self.holds = name, value, output, holds
        self.side, self.wanted = side, wanted
        self.dtype = None  # element type, once known
        self.view = None  # the ArrayView passed to C
        self.finish = None  # returns the result to hand back, for an output

    @property
    def kind(self):
        return {ROWS: _arrays.FLOAT, MASK: _arrays.MASK_U8, STATS: _arrays.STATS_F32}[self.holds]


def int_in_range(value, lo, hi, what):
    try:
        value = operator.index(value)  # int, numpy integers; not float
    except TypeError:
        raise TypeError("%s must be an integer, got %s" % (what, type(value).__name__)) from None
    if not lo <= value < hi:
        raise ValueError("%s must lie in [%d, %d), got %d" % (what, lo, hi, value))
    return value


def probability(p):
    """p as a float for the C call; its range is the library's to judge."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError("p must be a real number, got %s" % type(p).__name__)
    try:
        return float(p)
    except OverflowError:
        return float("inf") if p > 0 else float("-inf")  # refused by the library with its text


def flag(value, what):
    if not (isinstance(value, bool) or type(value).__name__ == "bool_"):
        raise TypeError("%s must be True or False, got %s" % (what, type(value).__name__))
    return bool(value)


def options(backend, flags, stream, num_threads, views):
    """The C options; backend "auto" becomes "cuda" when an array says it is device memory, so
    that a library without CUDA refuses the call instead of reading device pointers."""
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ValueError("backend must be one of %s, got %r" % (sorted(BACKENDS), backend))
        code = BACKENDS[backend]
    else:
        code = int_in_range(backend, -2**31, 2**31, "backend")  # passed on; the library judges
    if code == BACKENDS["auto"] and any(v.cuda for v in views):
        code = BACKENDS["cuda"]
    if stream is None:
        stream = next((v.stream for v in views if v.stream is not None), None)
    o = lib.softmax_default_options()
    o.backend = code
    o.flags = flags
    o.stream = int_in_range(stream, 0, 2**64, "stream") if stream is not None else None
    o.num_threads = int_in_range(num_threads, -2**31, 2**31, "num_threads")
    return o


def _side_dtypes(args, dtype):
    """(x_dtype, y_dtype): read from the arrays whose type is known (inputs, and outputs the
    caller gave), with dtype= naming the storage type of the side that the outputs mirror; a
    side that nothing names is stored as the other one."""
    known = {}
    for a in args:
        if a.holds == ROWS and not a.output:
            first = known.setdefault(a.side, (a.dtype, a.name))
            if first[0] != a.dtype:
                raise ValueError("%s has dtype %s but %s has dtype %s: both are stored as the "
                                 "forward call's %s" % (a.name, _arrays.DTYPE_NAMES[a.dtype],
                                                        first[1], _arrays.DTYPE_NAMES[first[0]],
                                                        a.side))
    wanted = _dtypes.code_of(dtype) if dtype is not None else None
    for a in args:
        if a.holds != ROWS or not a.output:
            continue
        if wanted is not None and a.dtype is not None and wanted != a.dtype:
            raise ValueError("%s has dtype %s but dtype=%s was asked for"
                             % (a.name, _arrays.DTYPE_NAMES[a.dtype], _dtypes.NAMES[wanted]))
        want = wanted if wanted is not None else a.dtype
        if a.side in known:
            have, source = known[a.side]
            if want is not None and want != have:
                raise ValueError("%s is stored as %s (%s), so it cannot be %s"
                                 % (a.name, source, _arrays.DTYPE_NAMES[have],
                                    _arrays.DTYPE_NAMES[want]))
        elif want is not None:
            known[a.side] = (want, "dtype=" if wanted is not None else a.name)
    other = {X: Y, Y: X}
    for side in (X, Y):
        if side not in known:
            known[side] = known[other[side]]
    return known[X][0], known[Y][0]


def _output_code(a, x_dtype, y_dtype):
    if a.holds == ROWS:
        return x_dtype if a.side == X else y_dtype
    return _arrays.MASK_U8 if a.holds == MASK else _arrays.STATS_F32


def _describe(a, obj):
    v = _arrays.describe(obj, a.name, a.kind)
    if a.output and v.readonly:
        raise ValueError("%s is read-only" % a.name)
    return v


def _prepare_strict(args, dtype):
    """softmax.rows / softmax.dropout: arrays passed as they are (C-contiguous 1-D or 2-D),
    outputs allocated with the first array's shape."""
    first = args[0]
    for a in args:
        if a.value is not None:
            a.view = _describe(a, a.value)
            a.dtype = a.view.dtype
            if a.view.shape != first.view.shape:
                raise ValueError("%s has shape %s but %s has shape %s"
                                 % (a.name, a.view.shape, first.name, first.view.shape))
    x_dtype, y_dtype = _side_dtypes(args, dtype)
    for a in args:
        if a.view is None and a.wanted:
            new = _arrays.empty(first.value, first.view.shape, _output_code(a, x_dtype, y_dtype))
            a.view = _describe(a, new)
        if a.output and a.view is not None:
            a.finish = (lambda obj: lambda: obj)(a.view.obj)
    return first.view.rows, first.view.cols, x_dtype, y_dtype


def _prepare_axis(args, dtype, axis):
    """The numpy-style functions: N-d arrays along `axis`, moved and copied as needed."""
    for a in args:
        a.value = as_array(a.value)
    first = args[0]
    ops_for(first.value, first.name)  # a TypeError for a non-array before its shape is read
    layout = AxisLayout(first.value.shape, axis)
    for a in args:
        if not a.output:
            work = (layout.stats_in(a.value, a.name) if a.holds == STATS
                    else layout.rows_in(a.value, a.name))
            a.view = _describe(a, work)
            a.dtype = a.view.dtype
        elif a.value is not None:
            layout.check_shape(a.value, a.name, stats=a.holds == STATS)
            a.dtype = _arrays.dtype_of(a.value, a.name, a.kind)
    x_dtype, y_dtype = _side_dtypes(args, dtype)
    for a in args:
        if not a.output or not a.wanted:
            continue

        def new(shape, code=_output_code(a, x_dtype, y_dtype)):
            return _arrays.empty(first.value, shape, code)
        if a.holds == STATS:
            target, a.finish = layout.stats_out(new)
        else:
            target, a.finish = layout.rows_out(a.value, a.name, new)
        a.view = _describe(a, target)
    return layout.rows, layout.cols, x_dtype, y_dtype


def call(fn, args, scalars=(), *, axis=None, dtype=None, log=False, backend="auto",
         stream=None, num_threads=0):
    """Runs the C function fn(pointers of args..., rows, cols, dtype, scalars..., options) and
    returns the outputs' results, in argument order. axis=None: softmax.rows' strict layout."""
    if axis is None:
        rows, cols, x_dtype, y_dtype = _prepare_strict(args, dtype)
    else:
        rows, cols, x_dtype, y_dtype = _prepare_axis(args, dtype, axis)
    views = [a.view for a in args if a.view is not None]
    o = options(backend, FLAG_LOG if flag(log, "log") else 0, stream, num_threads, views)
    if y_dtype != x_dtype:
        o.flags |= FLAG_Y_DTYPE
        o.y_dtype = y_dtype
    pointers = [a.view.ptr if a.view is not None else None for a in args]
    check(fn(*pointers, rows, cols, x_dtype, *scalars, ctypes.byref(o)))
    return [a.finish() for a in args if a.output and a.wanted]
