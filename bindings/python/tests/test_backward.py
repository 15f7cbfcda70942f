# SPDX-License-Identifier: Apache-2.0
"""softmax.softmax_backward and softmax.dropout_backward on numpy arrays against the float64
gradient of the stored inputs, outputs poisoned with NaN."""
import unittest

import numpy as np

import softmax
from support import (FreshInputs, arithmetic, assert_close, backward_tolerance, reference,
                     reference_backward)

SHAPES = [(1, 1), (3, 7), (17, 1000), (2, 40000), (257, 33)]


class SoftmaxBackward(FreshInputs):

    def forward_output(self, shape, dtype, log, axis=-1):
        """A forward result y as the library would store it: the reference rounded to dtype."""
        x = self.rng.uniform(-8, 8, size=shape)
        return reference(x, log, axis).astype(dtype)

    def grad(self, shape, dtype):
        return self.rng.uniform(-1, 1, size=shape).astype(dtype)

    def check(self, y, dy, log, dx, axis=-1, fp64=None):
        want = reference_backward(y, dy, log, axis)
        name = dx.dtype.name
        tol = backward_tolerance(name, y, dy, log, fp64=fp64, axis=axis)
        assert_close(self, np.moveaxis(dx, axis, -1), np.moveaxis(want, axis, -1), name,
                     tol=np.moveaxis(tol, axis, -1))

    def test_same_dtype_every_shape(self):
        for dtype in (np.float32, np.float16, np.float64):
            for log in (False, True):
                for shape in SHAPES:
                    with self.subTest(dtype=np.dtype(dtype).name, log=log, shape=shape):
                        y = self.forward_output(shape, dtype, log)
                        dy = self.grad(shape, dtype)
                        out = np.full(shape, np.nan, dtype)
                        dx = softmax.softmax_backward(y, dy, log, out=out)
                        self.assertIs(dx, out)
                        self.check(y, dy, log, dx)

    def test_dx_stored_as_the_forward_input_type(self):
        # Mixed precision: y and dy as the forward's result type, dx as its input type.
        for y_type, dx_name in ((np.float16, "float32"), (np.float32, "float16"),
                                (np.float64, "float32"), (np.float32, "float64")):
            for log in (False, True):
                with self.subTest(y=np.dtype(y_type).name, dx=dx_name, log=log):
                    y = self.forward_output((33, 513), y_type, log)
                    dy = self.grad(y.shape, y_type)
                    dx = softmax.softmax_backward(y, dy, log, dtype=dx_name)
                    self.assertEqual(dx.dtype, np.dtype(dx_name))
                    fp64 = "float64" in (dx_name, y.dtype.name)
                    self.check(y, dy, log, dx, fp64=fp64)
                    out = np.full(y.shape, np.nan, dx_name)
                    softmax.softmax_backward(y, dy, log, out=out)  # out's dtype says the same
                    np.testing.assert_array_equal(out, dx)

    def test_along_an_axis_and_strided(self):
        for axis in (0, 1):
            for log in (False, True):
                with self.subTest(axis=axis, log=log):
                    y = self.forward_output((300, 40), np.float32, log, axis)
                    dy = self.grad((300, 80), np.float32)[:, ::2]
                    self.check(y, dy, log, softmax.softmax_backward(y, dy, log, axis=axis), axis)

    def test_in_place_over_dy(self):
        for log in (False, True):
            with self.subTest(log=log):
                y = self.forward_output((64, 1000), np.float32, log)
                dy = self.grad(y.shape, np.float32)
                dy_copy = dy.copy()
                self.assertIs(softmax.softmax_backward(y, dy, log, out=dy), dy)
                self.check(y, dy_copy, log, dy)

    def test_exact_zero_where_y_is_zero(self):
        x = self.rng.uniform(-8, 8, size=(5, 64))
        x[:, ::3] = -np.inf
        y = reference(x).astype(np.float32)
        self.assertTrue((y[:, ::3] == 0).all())
        dy = self.grad(y.shape, np.float32)
        dx = softmax.softmax_backward(y, dy)
        self.assertTrue((dx[:, ::3] == 0).all(), "dx where y == 0 must be exactly 0")
        self.check(y, dy, False, dx)

    def test_empty(self):
        for shape in ((0, 5), (5, 0)):
            y = np.zeros(shape, np.float32)
            self.assertEqual(softmax.softmax_backward(y, y).shape, shape)
            self.assertEqual(softmax.dropout_backward(y, y, 0.5, 1).shape, shape)


class DropoutBackward(FreshInputs):

    def reference(self, x, dy, p, mask, axis=-1):
        """s * (g - sum(s * g)) with g = keep ? dy / (1 - p) : 0, s = softmax(x), in float64.

        p is the float32 the call receives."""
        s = reference(x, axis=axis)
        scale = 1.0 / (1.0 - float(np.float32(p)))
        g = np.where(mask == 1, np.asarray(dy, np.float64) * scale, 0.0)
        return s, g, reference_backward(s, g, axis=axis)

    def check(self, x, dy, p, seed, offset, dx, axis=-1):
        _, mask = softmax.softmax_dropout(x, p, seed, offset, axis=axis, return_mask=True)
        s, g, want = self.reference(x, dy, p, mask, axis)
        name = dx.dtype.name
        # s is recomputed inside the call (fp32, or fp64 when x or dy is float64), so its
        # arithmetic error enters as an error in y.
        fp64 = "float64" in (name, np.asarray(dy).dtype.name)
        tol = backward_tolerance(name, s, g, False, fp64=fp64, axis=axis,
                                 y_rounding=arithmetic(x.shape[axis], fp64))
        assert_close(self, np.moveaxis(dx, axis, -1), np.moveaxis(want, axis, -1), name,
                     tol=np.moveaxis(tol, axis, -1))

    def test_matches_the_gradient_through_the_forward_mask(self):
        for dtype in (np.float32, np.float16, np.float64):
            for shape in ((37, 700), (3, 5000), (64, 33)):
                with self.subTest(dtype=np.dtype(dtype).name, shape=shape):
                    x = self.rng.uniform(-8, 8, size=shape).astype(dtype)
                    dy = self.rng.uniform(-1, 1, size=shape).astype(dtype)
                    out = np.full(shape, np.nan, dtype)
                    dx = softmax.dropout_backward(x, dy, 0.25, 1234, 7, out=out)
                    self.assertIs(dx, out)
                    self.check(x, dy, 0.25, 1234, 7, dx)

    def test_dy_stored_as_another_type(self):
        x = self.rng.uniform(-8, 8, size=(20, 300)).astype(np.float32)
        for dy_type in (np.float16, np.float64):
            with self.subTest(dy=np.dtype(dy_type).name):
                dy = self.rng.uniform(-1, 1, size=x.shape).astype(dy_type)
                dx = softmax.dropout_backward(x, dy, 0.1, 3, 4)
                self.assertEqual(dx.dtype, np.float32)
                self.check(x, dy, 0.1, 3, 4, dx)

    def test_along_an_axis_and_in_place(self):
        x = self.rng.uniform(-8, 8, size=(50, 6, 40)).astype(np.float32)
        dy = self.rng.uniform(-1, 1, size=x.shape).astype(np.float32)
        self.check(x, dy, 0.5, 9, 0, softmax.dropout_backward(x, dy, 0.5, 9, 0, axis=0), axis=0)
        dy_copy = dy.copy()
        self.assertIs(softmax.dropout_backward(x, dy, 0.5, 9, 1, out=dy), dy)
        self.check(x, dy_copy, 0.5, 9, 1, dy)

    def test_p_zero_is_the_softmax_gradient_and_p_one_gives_zeros(self):
        x = self.rng.uniform(-8, 8, size=(9, 333)).astype(np.float32)
        dy = self.rng.uniform(-1, 1, size=x.shape).astype(np.float32)
        self.check(x, dy, 0.0, 5, 0, softmax.dropout_backward(x, dy, 0.0, 5))
        dx = softmax.dropout_backward(x, dy, 1.0, 5)
        self.assertTrue((dx == 0).all(), "p = 1 drops everything: the gradient is exactly 0")


if __name__ == "__main__":
    unittest.main()
