# SPDX-License-Identifier: Apache-2.0
"""torch.autograd wrappers: libsoftmax's forward and backward calls as differentiable torch
functions, for host and CUDA tensors (on torch's current stream).

    import torch, softmax.torch
    y = softmax.torch.softmax(x, dim=-1)                      # log=True: log-softmax
    z = softmax.torch.softmax_dropout(x, 0.1, seed, offset)   # dropout(softmax(x)), one pass
    (y * w).sum().backward()                                  # gradients from the library

The gradients are the library's backward calls (softmax_rows_backward, and
softmax_dropout_backward, which recomputes softmax and mask from x, so no mask is kept). They
are not themselves differentiable: a second derivative raises an error.
"""
import torch as _torch  # the torch package (absolute import), not this module

from . import _numpy_style

_once_differentiable = _torch.autograd.function.once_differentiable


class _Softmax(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, dtype, log):
        fn = _numpy_style.log_softmax if log else _numpy_style.softmax
        y = fn(x, dim, dtype)
        ctx.save_for_backward(y)
        ctx.dim, ctx.log, ctx.x_dtype = dim, log, x.dtype
        return y

    @staticmethod
    @_once_differentiable
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        dx = None
        if ctx.needs_input_grad[0]:
            dx = _numpy_style.softmax_backward(y, dy, ctx.log, dtype=ctx.x_dtype, axis=ctx.dim)
        return dx, None, None, None


class _SoftmaxDropout(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p, seed, offset, dim):
        y = _numpy_style.softmax_dropout(x, p, seed, offset, dim)
        ctx.save_for_backward(x)
        ctx.dropout = (p, seed, offset, dim)
        return y

    @staticmethod
    @_once_differentiable
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        p, seed, offset, dim = ctx.dropout
        dx = None
        if ctx.needs_input_grad[0]:
            dx = _numpy_style.dropout_backward(x, dy, p, seed, offset, axis=dim)
        return dx, None, None, None, None


def softmax(x, dim=-1, dtype=None, log=False):
    """softmax (log=True: log-softmax) of the tensor x along dim, differentiable.

    dtype: the storage type of the result (torch dtype or name; default x's). The gradient is
    stored as x. Arithmetic is float64 when x or the result is float64, float32 otherwise.
    """
    return _Softmax.apply(x, dim, dtype, log)


def softmax_dropout(x, p, seed, offset=0, dim=-1):
    """dropout(softmax(x, dim), p) in one pass, differentiable: keep ? softmax / (1 - p) : 0.

    The mask is a pure function of (seed, offset) and the element's position in the
    [rows, cols] layout with dim moved last (as softmax.softmax_dropout), so the backward
    recomputes it instead of storing it. Use a fresh (seed, offset) pair for every step.
    """
    return _SoftmaxDropout.apply(x, p, seed, offset, dim)
