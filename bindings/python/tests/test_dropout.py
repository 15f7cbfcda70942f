# SPDX-License-Identifier: Apache-2.0
"""softmax.dropout on numpy arrays: consistent with its mask and the reference, reproducible."""
import unittest

import numpy as np

import softmax
from support import FreshInputs, assert_close, reference, tolerance


class DropoutNumpy(FreshInputs):

    def test_kept_elements_are_scaled_softmax_and_dropped_are_zero(self):
        x = self.rng.uniform(-8, 8, size=(37, 700)).astype(np.float32)
        p = 0.25
        out = np.full(x.shape, np.nan, dtype=np.float32)
        keep = np.full(x.shape, 0xAA, dtype=np.uint8)
        y, m = softmax.dropout(x, p, 1234, 7, out=out, mask=keep)
        self.assertIs(y, out)
        self.assertIs(m, keep)
        self.assertTrue(np.isin(m, (0, 1)).all(), "mask holds values other than 0 and 1")
        self.assertTrue((y[m == 0] == 0).all())
        want = reference(x) / (1 - p)
        kept = m == 1
        tol = 2 * tolerance("float32", want, False, x.shape[1])
        self.assertTrue((np.abs(y[kept] - want[kept]) <= tol[kept]).all())
        n, sd = m.size, np.sqrt(m.size * p * (1 - p))
        self.assertLess(abs(kept.sum() - (1 - p) * n), 6 * sd)

    def test_same_arguments_give_the_same_bits(self):
        x = self.rng.uniform(-8, 8, size=(64, 1000)).astype(np.float32)
        y1, m1 = softmax.dropout(x, 0.1, 42, 3, return_mask=True)
        y2, m2 = softmax.dropout(x, 0.1, 42, 3, return_mask=True)
        np.testing.assert_array_equal(m1, m2)
        np.testing.assert_array_equal(y1.view(np.uint32), y2.view(np.uint32))
        for threads in (1, 2, 3):
            _, m = softmax.dropout(x, 0.1, 42, 3, return_mask=True, num_threads=threads)
            np.testing.assert_array_equal(m1, m)

    def test_mask_depends_on_flat_index_not_shape(self):
        x = self.rng.uniform(-8, 8, size=64000).astype(np.float32)
        _, a = softmax.dropout(x.reshape(64, 1000), 0.5, 9, 0, return_mask=True)
        _, b = softmax.dropout(x, 0.5, 9, 0, return_mask=True)
        _, c = softmax.dropout(x.reshape(1000, 64), 0.5, 9, 0, return_mask=True)
        np.testing.assert_array_equal(a.ravel(), b)
        np.testing.assert_array_equal(a.ravel(), c.ravel())

    def test_seed_and_offset_change_the_mask(self):
        x = np.zeros((16, 512), dtype=np.float32)
        _, base = softmax.dropout(x, 0.5, 1, 0, return_mask=True)
        _, other_seed = softmax.dropout(x, 0.5, 2, 0, return_mask=True)
        _, other_offset = softmax.dropout(x, 0.5, 1, 1, return_mask=True)
        self.assertGreater((base != other_seed).sum(), x.size // 4)
        self.assertGreater((base != other_offset).sum(), x.size // 4)

    def test_p_zero_and_p_one(self):
        x = self.rng.uniform(-8, 8, size=(9, 333)).astype(np.float32)
        y0, m0 = softmax.dropout(x, 0.0, 5, return_mask=True)
        self.assertTrue((m0 == 1).all())
        assert_close(self, y0, reference(x), "float32")
        y1, m1 = softmax.dropout(x, 1.0, 5, return_mask=True)
        self.assertTrue((m1 == 0).all())
        self.assertTrue((y1 == 0).all())

    def test_float16_in_place_without_mask(self):
        x = self.rng.uniform(-8, 8, size=(12, 1025)).astype(np.float16)
        y_ref, m = softmax.dropout(x, 0.3, 77, 11, return_mask=True)
        xy = x.copy()
        y = softmax.dropout(xy, 0.3, 77, 11, out=xy)
        self.assertIs(y, xy)
        self.assertTrue((y[m == 0] == 0).all())
        np.testing.assert_array_equal(y.view(np.uint16), y_ref.view(np.uint16))


if __name__ == "__main__":
    unittest.main()
