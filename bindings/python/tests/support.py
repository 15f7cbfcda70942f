# SPDX-License-Identifier: Apache-2.0
"""Test helpers: float64 reference, the C++ suites' tolerance (tests/common/reference.h), and a
host bfloat16 array type (numpy has none) exposing __array_interface__ as torch does ("<V2")."""
import math
import os
import unittest

import numpy as np


class FreshInputs(unittest.TestCase):
    """Each test gets self.rng from a seed that differs from run to run, so every run sees fresh
    inputs; the seed is in every failure message (longMessage), and SOFTMAX_TEST_SEED repeats it."""

    def setUp(self):
        env = os.environ.get("SOFTMAX_TEST_SEED")
        self.seed = int(env) if env else int(np.random.SeedSequence().entropy) % 2**64
        self.rng = np.random.default_rng(self.seed)

    def _formatMessage(self, msg, standardMsg):
        text = super()._formatMessage(msg, standardMsg)
        return "%s [random inputs from seed %d: SOFTMAX_TEST_SEED=%d repeats them]" % (
            text, self.seed, self.seed)


def reference(x, log=False, axis=-1):
    """softmax (log-softmax) along axis in float64."""
    x = np.asarray(x, dtype=np.float64)
    m = x.max(axis=axis, keepdims=True)
    s = np.exp(x - m).sum(axis=axis, keepdims=True)
    return (x - m - np.log(s)) if log else np.exp(x - m) / s


def reference_backward(y, dy, log=False, axis=-1):
    """The softmax gradient along axis in float64, from the forward's output y."""
    y, dy = np.asarray(y, np.float64), np.asarray(dy, np.float64)
    if log:
        return dy - np.exp(y) * dy.sum(axis=axis, keepdims=True)
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))


# Unit roundoff of each storage type, and its smallest subnormal step: a value below it may come
# out as zero or as that step (tests/common/reference.h has the same numbers).
STORAGE = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11,
           "bfloat16": 2.0 ** -8}
FLOOR = {"float64": 2.0 ** -1074, "float32": 2.0 ** -149, "float16": 2.0 ** -24,
         "bfloat16": 2.0 ** -133}


def arithmetic(cols, fp64):
    """The library's arithmetic error for a row of cols elements: fp64 when any array is
    float64, fp32 otherwise."""
    return (1e-14 if fp64 else 1e-6) * (1.0 + math.log2(cols + 1.0) / 8.0)


def tolerance(dtype_name, want, log, cols, fp64=None):
    """Absolute tolerance of a forward result stored as dtype_name whose exact value is want."""
    arith = arithmetic(cols, dtype_name == "float64" if fp64 is None else fp64)
    a = np.abs(want)
    return a * (STORAGE[dtype_name] + arith) + (arith * (1.0 + a) if log else FLOOR[dtype_name])


def backward_tolerance(dtype_name, y, dy, log, fp64=None, y_rounding=0.0, axis=-1):
    """Absolute tolerance of a gradient stored as dtype_name, computed from y and dy. The
    arithmetic error scales with the terms that are added (|y| (|dy| + sum |dy y|), or
    |dy| + exp(y) sum |dy| for log-softmax); y_rounding is the relative error in y when the
    reference uses the exact y rather than the stored one (log-softmax's exp(y) magnifies an
    absolute error of |y| y_rounding)."""
    y, dy = np.asarray(y, np.float64), np.asarray(dy, np.float64)
    cols = y.shape[axis] if y.ndim else 1
    arith = arithmetic(cols, dtype_name == "float64" if fp64 is None else fp64)
    if log:
        terms = np.abs(dy) + np.exp(y) * np.abs(dy).sum(axis=axis, keepdims=True)
        y_err = 4 * y_rounding * (1.0 + np.abs(y))
    else:
        terms = np.abs(y) * (np.abs(dy) + np.abs(dy * y).sum(axis=axis, keepdims=True))
        y_err = 4 * y_rounding
    want = reference_backward(y, dy, log, axis)
    return terms * (arith + y_err) + np.abs(want) * STORAGE[dtype_name] + FLOOR[dtype_name]


def assert_close(test, got, want, dtype_name, log=False, tol=None, fp64=None):
    """got against the float64 want: NaN must be NaN, an infinity or an exact zero of want must
    be hit exactly, anything else must lie within tol (default: the forward's tolerance)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    test.assertEqual(got.shape, want.shape)
    if tol is None:
        tol = tolerance(dtype_name, want, log, want.shape[-1] if want.ndim else 1, fp64)
    tol = np.broadcast_to(tol, want.shape)
    with np.errstate(invalid="ignore"):
        ok = np.where(np.isnan(want), np.isnan(got),
                      np.where(np.isinf(want) | (want == 0), got == want,
                               np.abs(got - want) <= tol))
    if not ok.all():
        i = tuple(np.argwhere(~ok)[0])
        test.fail(test._formatMessage(None, "%s: first bad element %s: got %r, want %r, "
                                      "tolerance %r (%d bad)"
                                      % (dtype_name, i, got[i], want[i], tol[i],
                                         int((~ok).sum()))))


def dtype_name(array):
    """"float32", "bfloat16", ... for a numpy array, torch tensor or HostBf16Array."""
    return str(array.dtype).rpartition(".")[2]


def f32_to_bf16_bits(x):
    """Round to nearest even; NaN stays NaN."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


class HostBf16Array:
    """bfloat16 values held as uint16 bits, exported the way torch exports bfloat16."""

    dtype = "bfloat16"

    def __init__(self, bits):
        self.bits = np.ascontiguousarray(bits, dtype=np.uint16)

    @property
    def __array_interface__(self):
        iface = dict(self.bits.__array_interface__)
        iface["typestr"] = "<V2"
        iface["descr"] = [("", "<V2")]
        return iface

    def to_f32(self):
        return bf16_bits_to_f32(self.bits)
