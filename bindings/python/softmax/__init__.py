# SPDX-License-Identifier: Apache-2.0
"""libsoftmax for Python: softmax, log-softmax, fused softmax+dropout and their gradients over
the C library, for numpy, torch and cupy arrays.

    import numpy as np, softmax
    x = np.random.rand(4, 1000).astype(np.float32)
    y = softmax.softmax(x)                                # any shape; axis=, dtype= (result type)
    dx = softmax.softmax_backward(y, np.ones_like(y))     # gradient, from y and dy
    z, keep = softmax.dropout(x, p=0.1, seed=42, offset=0, return_mask=True)

softmax.rows / softmax.dropout take C-contiguous [rows, cols] (or 1-D) arrays as they are, with
no copy; the numpy-style functions (softmax, log_softmax, softmax_dropout, softmax_backward,
dropout_backward and the sharded-row helpers) take any shape and strides, along any axis.
softmax.torch has torch.autograd wrappers. numpy arrays go through __array_interface__; torch
tensors and cupy arrays on the GPU through __cuda_array_interface__, zero-copy, on the array's
stream. Failures raise SoftmaxError with the library's status and message; bad arguments also
derive from ValueError, wrong argument types raise TypeError.
"""
from ._api import backend_available, dropout, rows, version
from ._errors import SoftmaxArgumentError, SoftmaxError
from ._numpy_style import (backward_row_stats, dropout_backward, log_softmax, row_stats,
                           rows_backward_from_stats, rows_from_stats, softmax, softmax_backward,
                           softmax_dropout)

# The version of the library this package loaded (for an installed package, the one bundled
# with it; SOFTMAX_LIBRARY can point elsewhere).
__version__ = version()

__all__ = ["softmax", "log_softmax", "softmax_dropout", "softmax_backward", "dropout_backward",
           "row_stats", "rows_from_stats", "backward_row_stats", "rows_backward_from_stats",
           "rows", "dropout", "backend_available", "version", "SoftmaxError",
           "SoftmaxArgumentError"]
