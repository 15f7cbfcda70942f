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


def reference(x, log=False):
    x = np.asarray(x, dtype=np.float64)
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    m = x2.max(axis=1, keepdims=True)
    s = np.exp(x2 - m).sum(axis=1, keepdims=True)
    y = (x2 - m - np.log(s)) if log else np.exp(x2 - m) / s
    return y.reshape(x.shape)


STORAGE = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}
# fp16's subnormal spacing: small probabilities stored in fp16 lose relative precision there.
FLOOR = {"float32": 0.0, "float16": 2.0 ** -24, "bfloat16": 0.0}


def tolerance(dtype_name, want, log, cols):
    arith = 1e-6 * (1.0 + math.log2(cols + 1.0) / 8.0)
    a = np.abs(want)
    return (a * (STORAGE[dtype_name] + arith) + FLOOR[dtype_name]
            + (arith * (1.0 + a) if log else 1e-30))


def assert_close(test, got, want, dtype_name, log=False):
    got = np.asarray(got, dtype=np.float64)
    cols = want.shape[-1]
    tol = tolerance(dtype_name, want, log, cols)
    bad = ~(np.abs(got - want) <= tol)
    if bad.any():
        i = np.argwhere(bad)[0]
        test.fail(test._formatMessage(None, "%s: first bad element %s: got %r, want %r, "
                                      "tolerance %r (%d bad)"
                                      % (dtype_name, tuple(i), got[tuple(i)], want[tuple(i)],
                                         tol[tuple(i)], int(bad.sum()))))


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
