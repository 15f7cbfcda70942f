# SPDX-License-Identifier: Apache-2.0
"""softmax.softmax / log_softmax / softmax_dropout on numpy arrays of any shape, along any axis,
strided or not, against the float64 reference, with NaN-poisoned outputs."""
import unittest

import numpy as np

import softmax
from support import FreshInputs, assert_close, reference, tolerance

try:
    import ml_dtypes
except ImportError:  # depends on the environment: numpy has no bfloat16 of its own
    ml_dtypes = None


class AlongAxis(FreshInputs):

    def random(self, shape, dtype=np.float32):
        return self.rng.uniform(-8, 8, size=shape).astype(dtype)

    def test_every_axis_of_a_3d_array(self):
        x = self.random((5, 6, 700))
        for fn, log in ((softmax.softmax, False), (softmax.log_softmax, True)):
            for axis in (0, 1, 2, -1, -2, -3):
                with self.subTest(log=log, axis=axis):
                    y = fn(x, axis=axis)
                    self.assertEqual((y.shape, y.dtype), (x.shape, x.dtype))
                    assert_close(self, np.moveaxis(y, axis, -1),
                                 np.moveaxis(reference(x, log, axis), axis, -1), "float32", log)

    def test_strided_and_transposed_inputs_are_copied_not_refused(self):
        base = self.random((40, 300))
        for x in (base[::3], base[:, ::2], base.T, base[5:20, 7:250:3], base[::-1, ::-1]):
            with self.subTest(strides=x.strides):
                for axis in (0, 1):
                    assert_close(self, np.moveaxis(softmax.softmax(x, axis), axis, -1),
                                 np.moveaxis(reference(x, axis=axis), axis, -1), "float32")
        self.assertTrue(np.isfinite(base).all())  # the input is not written

    def test_out_written_directly_or_through_a_copy(self):
        x = self.random((8, 9, 10))
        direct = np.full((8, 9, 10), np.nan, np.float32)
        self.assertIs(softmax.softmax(x, out=direct), direct)
        assert_close(self, direct, reference(x), "float32")
        # axis 0 of an array laid out with axis 0 last in memory: written without a copy
        moved = np.full((9, 10, 8), np.nan, np.float32)
        out = np.moveaxis(moved, -1, 0)
        self.assertIs(softmax.log_softmax(x, axis=0, out=out), out)
        assert_close(self, moved, np.moveaxis(reference(x, True, 0), 0, -1), "float32", True)
        # a strided out: written through a temporary
        holder = np.full((8, 9, 20), np.nan, np.float32)
        out = holder[:, :, ::2]
        softmax.softmax(x, axis=1, out=out)
        assert_close(self, np.moveaxis(out, 1, -1), np.moveaxis(reference(x, axis=1), 1, -1),
                     "float32")
        self.assertTrue(np.isnan(holder[:, :, 1::2]).all(), "wrote between out's elements")

    def test_in_place_along_any_axis(self):
        for axis in (-1, 0):
            with self.subTest(axis=axis):
                x = self.random((33, 65))
                want = reference(x, axis=axis)
                self.assertIs(softmax.softmax(x, axis, out=x), x)
                assert_close(self, np.moveaxis(x, axis, -1), np.moveaxis(want, axis, -1),
                             "float32")

    def test_one_dimensional_and_scalar(self):
        v = self.random(4097, np.float16)
        assert_close(self, softmax.softmax(v), reference(v), "float16")
        s = softmax.log_softmax(np.float32(3.5))
        self.assertEqual((s.shape, float(s)), ((), 0.0))
        self.assertEqual(float(softmax.softmax(np.array(-2.0, np.float32), axis=0)), 1.0)

    def test_empty_arrays_give_empty_results(self):
        for shape, axis in (((0, 7), -1), ((0, 7), 0), ((3, 0, 2), 1), ((3, 0, 2), 2), ((0,), 0)):
            with self.subTest(shape=shape, axis=axis):
                x = np.zeros(shape, np.float16)
                y = softmax.softmax(x, axis)
                self.assertEqual((y.shape, y.dtype), (shape, np.float16))
                y, m = softmax.softmax_dropout(x, 0.5, 1, axis=axis, return_mask=True)
                self.assertEqual((y.shape, m.shape), (shape, shape))

    def test_infinities_and_nan(self):
        x = np.array([[0.0, -np.inf, 1.0, -np.inf], [np.nan, 0, 0, 0], [-np.inf] * 4,
                      [np.inf, 0, 0, 0]], np.float32)
        for log in (False, True):
            fn = softmax.log_softmax if log else softmax.softmax
            with np.errstate(invalid="ignore"):
                want = reference(x, log)
            # exact zeros (softmax) and -inf (log-softmax) where x is -inf, NaN rows as float64
            assert_close(self, fn(x), want, "float32", log)

    def test_dropout_along_an_axis_is_dropout_of_the_moved_rows(self):
        x = self.random((6, 50, 40))
        y, m = softmax.softmax_dropout(x, 0.3, 11, 5, axis=1, return_mask=True)
        rows_y, rows_m = softmax.dropout(np.ascontiguousarray(np.moveaxis(x, 1, -1)).reshape(
            -1, 50), 0.3, 11, 5, return_mask=True)
        np.testing.assert_array_equal(np.moveaxis(m, 1, -1).reshape(-1, 50), rows_m)
        np.testing.assert_array_equal(np.moveaxis(y, 1, -1).reshape(-1, 50), rows_y)
        self.assertTrue((y[m == 0] == 0).all())
        kept = m == 1
        want = reference(x, axis=1) / 0.7
        tol = 2 * tolerance("float32", want, False, 50)
        self.assertTrue((np.abs(y - want)[kept] <= tol[kept]).all())

    def test_float64_along_an_axis(self):
        x = self.random((7, 300, 3), np.float64)
        assert_close(self, np.moveaxis(softmax.softmax(x, 1), 1, -1),
                     np.moveaxis(reference(x, axis=1), 1, -1), "float64")

    def test_dtype_names_the_result_type(self):
        x = self.random((9, 4, 100))
        for spec in ("float16", np.float16, np.dtype("<f2")):
            with self.subTest(dtype=spec):
                y = softmax.softmax(x, axis=-2, dtype=spec)
                self.assertEqual(y.dtype, np.float16)
                assert_close(self, np.moveaxis(y, -2, -1),
                             np.moveaxis(reference(x, axis=-2), -2, -1), "float16")
        y = softmax.log_softmax(x.astype(np.float16), dtype="float64")
        self.assertEqual(y.dtype, np.float64)
        assert_close(self, y, reference(x.astype(np.float16), True), "float64", True, fp64=True)

    @unittest.skipIf(ml_dtypes is None, "ml_dtypes (numpy's bfloat16) is not installed")
    def test_bfloat16_numpy_arrays(self):
        x = self.random((12, 513)).astype(ml_dtypes.bfloat16)
        y = softmax.softmax(x, axis=0)
        self.assertEqual(y.dtype, x.dtype)
        assert_close(self, np.moveaxis(y, 0, -1), np.moveaxis(reference(x, axis=0), 0, -1),
                     "bfloat16")
        y = softmax.softmax(x.astype(np.float32), dtype="bfloat16")
        self.assertEqual(y.dtype, x.dtype)


if __name__ == "__main__":
    unittest.main()
