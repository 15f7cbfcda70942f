"""libsoftmax for Python: row-wise softmax and fused softmax+dropout over the C library.

    import numpy as np, softmax
    x = np.random.rand(4, 1000).astype(np.float32)
    y = softmax.rows(x)                                   # or log=True, out=x for in place
    z, keep = softmax.dropout(x, p=0.1, seed=42, offset=0, return_mask=True)

numpy arrays go through __array_interface__; torch tensors and cupy arrays on the GPU through
__cuda_array_interface__, zero-copy, on the array's stream. Failures raise SoftmaxError with the
library's status and message; bad arguments also derive from ValueError.
"""
from ._api import backend_available, dropout, rows, version
from ._errors import SoftmaxArgumentError, SoftmaxError

__all__ = ["rows", "dropout", "backend_available", "version", "SoftmaxError",
           "SoftmaxArgumentError"]
