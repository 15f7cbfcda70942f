# SPDX-License-Identifier: Apache-2.0
"""libsoftmax from Python: numpy arrays on the CPU and, when torch and a GPU are present, torch
tensors on the GPU without copies. Exits non-zero if any result is wrong.

    PYTHONPATH=bindings/python SOFTMAX_LIBRARY=build/libsoftmax.so \\
        /usr/bin/python3 examples/python/softmax_example.py
"""
import sys

import numpy as np

import softmax


def main():
    x = np.array([[1, 2, 3, 4], [-1, 0, 1, 2], [0, 0, 0, 1000]], dtype=np.float32)

    y = softmax.rows(x)
    print("softmax(x):\n", y)
    assert np.allclose(y.sum(axis=1), 1.0, atol=1e-5), "rows do not sum to 1"

    logp = softmax.rows(x, log=True)
    print("log_softmax(x) row 0:", logp[0])

    # The gradient of sum(w * softmax(x)) with respect to x, from the forward's output y.
    w = np.array([1, 0, 0, 0], dtype=np.float32)
    dx = softmax.softmax_backward(y, np.broadcast_to(w, y.shape))
    print("d sum(w * softmax(x)) / dx:\n", dx)
    assert np.allclose(dx, y * (w - y[:, :1]), atol=1e-6), "gradient differs from y * (w - y . w)"
    assert np.allclose(dx.sum(axis=1), 0.0, atol=1e-6), "softmax gradients sum to 0 per row"

    # Any shape and axis; the result may be stored in another type (here float16).
    cube = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    cols = softmax.softmax(cube, axis=1, dtype="float16")
    assert cols.dtype == np.float16 and np.allclose(cols.sum(axis=1), 1.0, atol=2e-3)

    z, keep = softmax.dropout(x, p=0.5, seed=42, offset=0, return_mask=True)
    print("dropout p=0.5 mask:\n", keep)
    assert (z[keep == 0] == 0).all(), "a dropped element is not zero"

    half = softmax.rows(np.linspace(-4, 4, 1024, dtype=np.float16))  # 1-D: one row, fp16
    print("fp16 row of 1024: max %.4f at %d" % (half.max(), half.argmax()))

    try:
        softmax.dropout(x, p=1.5, seed=42)
    except softmax.SoftmaxError as e:
        print("p = 1.5 refused as expected:", e)
    else:
        raise AssertionError("p = 1.5 was not refused")

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available() and softmax.backend_available("cuda"):
        t = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
        out = softmax.rows(t)  # zero-copy, on torch's current stream
        err = (out.float() - torch.softmax(t.float(), dim=1)).abs().max().item()
        print("torch bf16 on %s: max |difference| from torch.softmax %.2e" % (t.device, err))
        assert err < 1e-2
    else:
        print("(torch/CUDA part skipped: needs torch, a GPU and a CUDA-built libsoftmax)")

    print("libsoftmax %s: Python example OK" % softmax.version())
    return 0


if __name__ == "__main__":
    sys.exit(main())
