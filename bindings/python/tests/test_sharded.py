# SPDX-License-Identifier: Apache-2.0
"""The sharded-row helpers on numpy arrays: rows split by columns into shards, per-shard
statistics merged as a distributed caller would (in float32, as the statistics are), and the
result compared with the unsharded float64 softmax and gradient."""
import unittest

import numpy as np

import softmax
from support import (FreshInputs, arithmetic, assert_close, backward_tolerance, reference,
                     reference_backward, tolerance)

WIDTHS = [(1000,), (300, 700), (1, 40, 959, 2000), (64, 64, 64)]


def merge(stats):
    """M = max of the shard maxima; S = sum of row_sumexp * exp(shard max - M), leaving out the
    shards whose row_sumexp is 0 (an all -inf shard row: its max is -inf)."""
    maxima = np.stack([m for m, _ in stats])
    sums = np.stack([s for _, s in stats])
    big = maxima.max(axis=0)
    with np.errstate(invalid="ignore"):
        scaled = np.where(sums == 0, np.float32(0), sums * np.exp(maxima - big))
    return big.astype(np.float32), scaled.sum(axis=0, dtype=np.float32)


def shards(x, widths, axis=-1):
    return np.split(x, np.cumsum(widths)[:-1], axis=axis)


class ShardedForward(FreshInputs):

    def test_row_stats_of_one_shard(self):
        x = self.rng.uniform(-8, 8, size=(37, 700)).astype(np.float32)
        row_max, row_sumexp = softmax.row_stats(x)
        self.assertEqual((row_max.shape, row_max.dtype), ((37,), np.float32))
        np.testing.assert_array_equal(row_max, x.max(axis=1))
        want = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True)).sum(axis=1)
        assert_close(self, row_sumexp, want, "float32", tol=tolerance("float32", want, False, 700))

    def test_merged_shards_give_the_unsharded_softmax(self):
        for dtype in (np.float32, np.float16):
            for log in (False, True):
                for widths in WIDTHS:
                    with self.subTest(dtype=np.dtype(dtype).name, log=log, widths=widths):
                        x = self.rng.uniform(-8, 8, size=(19, sum(widths))).astype(dtype)
                        parts = shards(x, widths)
                        big, total = merge([softmax.row_stats(p) for p in parts])
                        out = [np.full(p.shape, np.nan, dtype) for p in parts]
                        for p, o in zip(parts, out):
                            self.assertIs(softmax.rows_from_stats(p, big, total, log, out=o), o)
                        # The merge's float32 rounding adds a few units to the arithmetic's error.
                        want = reference(x, log)
                        tol = tolerance(np.dtype(dtype).name, want, log, x.shape[1]) + \
                            4 * arithmetic(x.shape[1], False) * (np.abs(want) + log)
                        assert_close(self, np.concatenate(out, axis=1), want,
                                     np.dtype(dtype).name, log, tol=tol)

    def test_a_shard_row_of_all_minus_infinity(self):
        x = self.rng.uniform(-8, 8, size=(4, 96)).astype(np.float32)
        x[1, :32] = -np.inf
        parts = shards(x, (32, 64))
        stats = [softmax.row_stats(p) for p in parts]
        self.assertEqual((stats[0][0][1], stats[0][1][1]), (-np.inf, 0.0))
        big, total = merge(stats)
        y = np.concatenate([softmax.rows_from_stats(p, big, total) for p in parts], axis=1)
        self.assertTrue((y[1, :32] == 0).all(), "exp(-inf - max) must be exactly 0")
        want = reference(x)
        assert_close(self, y, want, "float32",
                     tol=tolerance("float32", want, False, 96) + 4e-6 * np.abs(want))

    def test_result_type_and_axis(self):
        x = self.rng.uniform(-8, 8, size=(500, 6)).astype(np.float32)
        parts = shards(x, (200, 300), axis=0)
        big, total = merge([softmax.row_stats(p, axis=0) for p in parts])
        self.assertEqual(big.shape, (6,))
        y = np.concatenate([softmax.rows_from_stats(p, big, total, dtype="float16", axis=0)
                            for p in parts], axis=0)
        self.assertEqual(y.dtype, np.float16)
        want = reference(x, axis=0)
        assert_close(self, y.T, want.T, "float16",
                     tol=(tolerance("float16", want, False, 500) + 4e-6 * np.abs(want)).T)

    def test_float64_rows_are_refused(self):
        x = np.ones((2, 4))
        for call in (lambda: softmax.row_stats(x),
                     lambda: softmax.rows_from_stats(x, np.zeros(2, np.float32),
                                                     np.ones(2, np.float32)),
                     lambda: softmax.backward_row_stats(x, x)):
            with self.assertRaises(softmax.SoftmaxError) as cm:
                call()
            self.assertEqual(cm.exception.status_name, "SOFTMAX_STATUS_INVALID_DTYPE")
            self.assertIn("float row statistics", cm.exception.message)


class ShardedBackward(FreshInputs):

    def test_summed_row_dots_give_the_unsharded_gradient(self):
        for log in (False, True):
            for widths in WIDTHS:
                with self.subTest(log=log, widths=widths):
                    cols = sum(widths)
                    y = reference(self.rng.uniform(-8, 8, size=(23, cols)), log).astype(
                        np.float32)
                    dy = self.rng.uniform(-1, 1, size=y.shape).astype(np.float32)
                    ys, dys = shards(y, widths), shards(dy, widths)
                    dots = [softmax.backward_row_stats(a, b, log) for a, b in zip(ys, dys)]
                    self.assertEqual((dots[0].shape, dots[0].dtype), ((23,), np.float32))
                    row_dot = np.sum(dots, axis=0, dtype=np.float32)
                    dx = np.concatenate([softmax.rows_backward_from_stats(a, b, row_dot, log)
                                         for a, b in zip(ys, dys)], axis=1)
                    tol = backward_tolerance("float32", y, dy, log) * 4
                    assert_close(self, dx, reference_backward(y, dy, log), "float32", tol=tol)

    def test_row_dot_of_one_shard(self):
        y = reference(self.rng.uniform(-8, 8, size=(7, 300))).astype(np.float16)
        dy = self.rng.uniform(-1, 1, size=y.shape).astype(np.float16)
        y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
        for log, want in ((False, (dy64 * y64).sum(axis=1)), (True, dy64.sum(axis=1))):
            with self.subTest(log=log):
                terms = (np.abs(dy64) if log else np.abs(dy64 * y64)).sum(axis=1)
                assert_close(self, softmax.backward_row_stats(y, dy, log), want, "float32",
                             tol=terms * arithmetic(300, False) + 1e-30)

    def test_dx_type_in_place_and_axis(self):
        y = reference(self.rng.uniform(-8, 8, size=(40, 9)), axis=0).astype(np.float16)
        dy = self.rng.uniform(-1, 1, size=y.shape).astype(np.float16)
        row_dot = softmax.backward_row_stats(y, dy, axis=0)
        self.assertEqual(row_dot.shape, (9,))
        dx = softmax.rows_backward_from_stats(y, dy, row_dot, dtype="float32", axis=0)
        self.assertEqual(dx.dtype, np.float32)
        tol = backward_tolerance("float32", y.T, dy.T, False) * 4
        want = reference_backward(y, dy, axis=0)
        assert_close(self, dx.T, want.T, "float32", tol=tol)
        dy_copy = dy.copy()
        self.assertIs(softmax.rows_backward_from_stats(y, dy, row_dot, out=dy, axis=0), dy)
        want16 = reference_backward(y, dy_copy, axis=0)
        assert_close(self, dy.T, want16.T, "float16",
                     tol=backward_tolerance("float16", y.T, dy_copy.T, False) * 4)


if __name__ == "__main__":
    unittest.main()
