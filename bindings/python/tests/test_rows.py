# SPDX-License-Identifier: Apache-2.0
"""softmax.rows on numpy arrays against the float64 reference, outputs poisoned with NaN."""
import unittest

import numpy as np

import softmax
from support import (FreshInputs, HostBf16Array, assert_close, bf16_bits_to_f32, f32_to_bf16_bits,
                     reference)

SHAPES = [(1, 1), (3, 7), (17, 1000), (2, 40000), (257, 33)]


class RowsNumpy(FreshInputs):

    def random(self, shape, dtype=np.float32):
        return self.rng.uniform(-8, 8, size=shape).astype(dtype)

    def test_float32_and_float16(self):
        for dtype, name in ((np.float32, "float32"), (np.float16, "float16")):
            for log in (False, True):
                for shape in SHAPES:
                    with self.subTest(dtype=name, log=log, shape=shape):
                        x = self.random(shape, dtype)
                        out = np.full(shape, np.nan, dtype=dtype)
                        y = softmax.rows(x, out=out, log=log)
                        self.assertIs(y, out)
                        assert_close(self, y, reference(x, log), name, log)

    def test_float64(self):
        for log in (False, True):
            for shape in SHAPES:
                with self.subTest(log=log, shape=shape):
                    x = self.random(shape, np.float64)
                    out = np.full(shape, np.nan)
                    softmax.rows(x, out=out, log=log)
                    assert_close(self, out, reference(x, log), "float64", log)

    def test_result_stored_as_another_type(self):
        # dtype= (or an out of another dtype) stores y in its own type; the arithmetic is fp64
        # when either side is float64.
        pairs = [(np.float32, "float16"), (np.float16, "float32"), (np.float32, "float64"),
                 (np.float64, "float32"), (np.float16, "float64")]
        for x_type, y_name in pairs:
            for log in (False, True):
                with self.subTest(x=np.dtype(x_type).name, y=y_name, log=log):
                    x = self.random((17, 1000), x_type)
                    fp64 = x.dtype == np.float64 or y_name == "float64"
                    y = softmax.rows(x, log=log, dtype=y_name)
                    self.assertEqual(y.dtype, np.dtype(y_name))
                    assert_close(self, y, reference(x, log), y_name, log, fp64=fp64)
                    out = np.full(x.shape, np.nan, dtype=y_name)
                    self.assertIs(softmax.rows(x, out=out, log=log), out)
                    np.testing.assert_array_equal(out, y)

    def test_bfloat16_result_of_float32_input(self):
        x = self.random((9, 333))
        out = HostBf16Array(np.full(x.shape, 0x7FC0, dtype=np.uint16))
        softmax.rows(x, out=out)
        assert_close(self, bf16_bits_to_f32(out.bits), reference(x), "bfloat16")

    def test_empty_arrays_give_empty_results(self):
        for shape in [(0, 5), (4, 0), (0,), (0, 0)]:
            with self.subTest(shape=shape):
                x = np.zeros(shape, np.float32)
                y = softmax.rows(x, log=True)
                self.assertEqual((y.shape, y.dtype), (shape, np.float32))
                y, m = softmax.dropout(x, 0.5, 1, return_mask=True)
                self.assertEqual((y.shape, m.shape, m.dtype), (shape, shape, np.uint8))

    def test_allocates_output_like_input(self):
        x = self.random((5, 300))
        y = softmax.rows(x)
        self.assertEqual((y.shape, y.dtype), (x.shape, x.dtype))
        self.assertFalse(np.shares_memory(x, y))
        assert_close(self, y, reference(x), "float32")

    def test_one_dimensional_is_one_row(self):
        x = self.random((4097,))
        y = softmax.rows(x, log=True)
        self.assertEqual(y.shape, (4097,))
        assert_close(self, y, reference(x, True), "float32", log=True)

    def test_in_place(self):
        x = self.random((33, 513))
        want = reference(x)
        y = softmax.rows(x, out=x)
        self.assertIs(y, x)
        assert_close(self, x, want, "float32")

    def test_bfloat16_through_array_interface(self):
        for shape in SHAPES:
            with self.subTest(shape=shape):
                x = HostBf16Array(f32_to_bf16_bits(self.random(shape)))
                out = HostBf16Array(np.full(shape, 0x7FC0, dtype=np.uint16))
                softmax.rows(x, out=out)
                assert_close(self, out.to_f32(), reference(x.to_f32()), "bfloat16")

    def test_views_that_are_c_contiguous_are_accepted(self):
        base = self.random((10, 64))
        x = base[2:5]  # a contiguous block of rows, not at the start of the buffer
        y = softmax.rows(x, backend="cpu", num_threads=1)
        assert_close(self, y, reference(x), "float32")
        column = self.random((7, 1))[:, 0:1]  # extent-1 dimension: its stride does not matter
        assert_close(self, softmax.rows(column), reference(column), "float32")

    def test_version_and_backends(self):
        self.assertTrue(softmax.version().startswith("0."))
        self.assertTrue(softmax.backend_available("cpu"))
        self.assertTrue(softmax.backend_available("auto"))


if __name__ == "__main__":
    unittest.main()
