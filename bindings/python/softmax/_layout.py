# SPDX-License-Identifier: Apache-2.0
"""N-d arrays seen along one axis as the C-contiguous [rows, cols] matrices the library takes.

The axis is moved last (a view) and the result made contiguous, which copies only when the
array is not already laid out that way; outputs are written straight into `out` when its moved
view is contiguous and through a temporary otherwise. numpy and cupy arrays are handled with
their module's own functions (the same names in both), torch tensors with torch's.
"""
import operator
import sys


class _NumpyLike:
    """numpy or cupy (module given)."""

    def __init__(self, module):
        self.module = module

    def moveaxis(self, a, src, dst):
        return self.module.moveaxis(a, src, dst)

    def is_contiguous(self, a):
        return bool(a.flags.c_contiguous)

    def contiguous(self, a):
        return self.module.ascontiguousarray(a)

    def reshape(self, a, shape):
        return a.reshape(shape)

    def copy_into(self, dst, src):
        dst[...] = src

    def for_reading(self, a):
        return a


class _Torch:
    def __init__(self, torch):
        self.torch = torch

    def moveaxis(self, a, src, dst):
        return a.movedim(src, dst)

    def is_contiguous(self, a):
        return a.is_contiguous()

    def contiguous(self, a):
        return a.contiguous()

    def reshape(self, a, shape):
        return a.reshape(shape)

    def copy_into(self, dst, src):
        dst.copy_(src)

    def for_reading(self, a):
        # The library's results are not differentiable by torch: its gradients are the
        # library's own backward calls (softmax.torch), so no autograd graph is recorded here.
        return a.detach()


def ops_for(obj, what):
    """The array functions for obj's kind, or TypeError if it is not a numpy, cupy or torch
    array (those are the kinds whose axes can be moved and copied here)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return _Torch(torch)
    module = sys.modules.get(type(obj).__module__.split(".")[0])
    ndarray = getattr(module, "ndarray", None)
    if isinstance(ndarray, type) and isinstance(obj, ndarray) and hasattr(module, "moveaxis"):
        return _NumpyLike(module)
    raise TypeError("%s must be a numpy, cupy or torch array, got %s (softmax.rows and "
                    "softmax.dropout take any C-contiguous array object)"
                    % (what, type(obj).__name__))


def as_array(obj):
    """A numpy scalar (np.float32(1.5)) as the 0-d array it stands for; anything else as is."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.generic):
        return np.asarray(obj)
    return obj


def normalize_axis(axis, ndim):
    """axis as an index into a shape of ndim >= 1 dimensions."""
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError("axis must be an integer, got %s" % type(axis).__name__) from None
    if not -ndim <= axis < ndim:
        raise ValueError("axis %d is out of range for an array of %d dimension%s"
                         % (axis, ndim, "" if ndim == 1 else "s"))
    return axis % ndim


class AxisLayout:
    """Where an N-d array's rows lie: `shape` is the arrays' common shape, `axis` the one the
    softmax runs along; rows = the product of the other extents, cols = shape[axis]. A 0-d array
    is one row of one element."""

    def __init__(self, shape, axis):
        self.shape = tuple(shape)
        work = self.shape if self.shape else (1,)
        self.axis = normalize_axis(axis, len(work))
        self.cols = work[self.axis]
        self.moved = work[:self.axis] + work[self.axis + 1:] + (self.cols,)
        self.stats_shape = self.shape[:self.axis] + self.shape[self.axis + 1:]
        self.rows = 1
        for n in self.moved[:-1]:
            self.rows *= n

    def _work(self, ops, a):
        return ops.reshape(a, (1,)) if not self.shape else a

    def check_shape(self, a, what, stats=False):
        want = self.stats_shape if stats else self.shape
        if tuple(a.shape) != want:
            raise ValueError("%s has shape %s but must have shape %s"
                             % (what, tuple(a.shape), want))

    def rows_in(self, a, what):
        """a (of the layout's shape) as a contiguous [rows, cols] array, copied if needed."""
        ops = ops_for(a, what)
        self.check_shape(a, what)
        m = ops.moveaxis(self._work(ops, ops.for_reading(a)), self.axis, -1)
        return ops.reshape(ops.contiguous(m), (self.rows, self.cols))

    def stats_in(self, a, what):
        """a per-row array (the layout's shape without the axis) as a contiguous [rows]."""
        ops = ops_for(a, what)
        self.check_shape(a, what, stats=True)
        return ops.reshape(ops.contiguous(ops.for_reading(a)), (self.rows,))

    def rows_out(self, out, what, new):
        """(target, finish) for a row output: target is the contiguous [rows, cols] array the
        library writes; finish() returns the result with the layout's shape, having copied the
        target into `out` when `out` could not be written directly. new(shape) allocates."""
        if out is None:
            a = new(self.moved)
            ops = ops_for(a, what)
            target = ops.reshape(a, (self.rows, self.cols))
            result = ops.moveaxis(a, -1, self.axis)
            if not self.shape:
                result = ops.reshape(result, ())
            return target, lambda: result
        ops = ops_for(out, what)
        self.check_shape(out, what)
        m = ops.moveaxis(self._work(ops, ops.for_reading(out)), self.axis, -1)
        if ops.is_contiguous(m):
            return ops.reshape(m, (self.rows, self.cols)), lambda: out
        temp = new(self.moved)
        target = ops.reshape(temp, (self.rows, self.cols))

        def finish():
            ops.copy_into(m, ops.reshape(target, self.moved))
            return out
        return target, finish

    def stats_out(self, new):
        """(target, finish) for a per-row float32 output, allocated by new(shape)."""
        a = new((self.rows,))
        return a, lambda: ops_for(a, "stats").reshape(a, self.stats_shape)
