"""Bad input: each is refused with a clear ValueError/TypeError (layout, dtype, integer range) or
a SoftmaxError carrying the library's status and message; nothing is written on failure."""
import unittest

import numpy as np

import softmax
from support import HostBf16Array

POISON = 0x7FC0DEAD


def poisoned(shape):
    return np.full(shape, POISON, dtype=np.uint32).view(np.float32)


class Errors(unittest.TestCase):
    def assertUntouched(self, y):
        self.assertTrue((y.view(np.uint32) == POISON).all(), "output written on failure")

    def assertStatus(self, cm, name, *fragments):
        e = cm.exception
        self.assertEqual(e.status_name, "SOFTMAX_STATUS_" + name, str(e))
        for f in fragments:
            self.assertIn(f, e.message)
        self.assertEqual(str(e), "%s: %s" % (e.status_name, e.message))

    def test_wrong_dtypes(self):
        for dtype in (np.float64, np.int32, np.uint16, np.complex64):
            with self.subTest(dtype=dtype):
                with self.assertRaises(ValueError) as cm:
                    softmax.rows(np.zeros((2, 3), dtype=dtype))
                self.assertIn("float32, float16 or bfloat16", str(cm.exception))
        with self.assertRaisesRegex(ValueError, "out has dtype float16 but x has dtype float32"):
            softmax.rows(np.zeros((2, 3), np.float32), out=np.zeros((2, 3), np.float16))
        with self.assertRaisesRegex(ValueError, "mask has dtype .*takes uint8"):
            softmax.dropout(np.zeros((2, 3), np.float32), 0.5, 1, mask=np.zeros((2, 3), np.int8))
        # A 2-byte void that does not call itself bfloat16 is not guessed at.
        void = np.zeros((2, 3), dtype="V2")
        with self.assertRaisesRegex(ValueError, "float32, float16 or bfloat16"):
            softmax.rows(void)

    def test_wrong_layouts(self):
        x = np.zeros((4, 6), np.float32)
        with self.assertRaisesRegex(ValueError, "C-contiguous"):
            softmax.rows(x.T)
        with self.assertRaisesRegex(ValueError, "C-contiguous"):
            softmax.rows(x[:, ::2])
        with self.assertRaisesRegex(ValueError, "1-D .* or 2-D"):
            softmax.rows(np.zeros((2, 3, 4), np.float32))
        with self.assertRaisesRegex(ValueError, "1-D .* or 2-D"):
            softmax.rows(np.float32(1.0).reshape(()))
        with self.assertRaisesRegex(ValueError, r"out has shape \(3, 6\) but x has shape \(4, 6\)"):
            softmax.rows(x, out=np.zeros((3, 6), np.float32))
        with self.assertRaisesRegex(ValueError, "mask has shape"):
            softmax.dropout(x, 0.5, 1, mask=np.zeros(24, np.uint8))

    def test_not_an_array(self):
        with self.assertRaisesRegex(TypeError, "must be an array"):
            softmax.rows([[1.0, 2.0]])
        with self.assertRaisesRegex(ValueError, "pass out="):
            softmax.rows(HostBf16Array(np.zeros((2, 2), np.uint16)))

    def test_read_only_output(self):
        x = np.zeros((2, 3), np.float32)
        out = np.zeros((2, 3), np.float32)
        out.setflags(write=False)
        with self.assertRaisesRegex(ValueError, "out is read-only"):
            softmax.rows(x, out=out)
        x.setflags(write=False)  # a read-only input is fine
        softmax.rows(x)

    def test_empty_arrays_are_reported_by_the_library(self):
        with self.assertRaises(softmax.SoftmaxError) as cm:
            softmax.rows(np.zeros((0, 5), np.float32))
        self.assertStatus(cm, "INVALID_SIZE", "rows must be > 0, got 0")
        with self.assertRaises(ValueError) as cm:  # argument errors are ValueErrors too
            softmax.rows(np.zeros(0, np.float32))
        self.assertStatus(cm, "INVALID_SIZE", "cols must be > 0, got 0")

    def test_null_pointers_are_reported_by_the_library(self):
        class NullArray:  # an interface that promises data it does not have
            __array_interface__ = {"shape": (2, 4), "typestr": "<f4", "data": (0, False),
                                   "version": 3}
        with self.assertRaises(softmax.SoftmaxError) as cm:
            softmax.rows(NullArray(), out=np.zeros((2, 4), np.float32))
        self.assertStatus(cm, "NULL_POINTER", "x is NULL")
        with self.assertRaises(softmax.SoftmaxError) as cm:
            softmax.dropout(np.zeros((2, 4), np.float32), 0.5, 1, out=NullArray())
        self.assertStatus(cm, "NULL_POINTER", "y is NULL")

    def test_bad_probability(self):
        x = np.ones((2, 4), np.float32)
        for p in (1.5, -0.1, float("nan"), float("inf")):
            with self.subTest(p=p):
                out = poisoned((2, 4))
                keep = np.full((2, 4), 0xAA, np.uint8)
                with self.assertRaises(softmax.SoftmaxArgumentError) as cm:
                    softmax.dropout(x, p, 1, 0, out=out, mask=keep)
                self.assertStatus(cm, "INVALID_PROBABILITY", "dropout p must lie in [0, 1]")
                self.assertUntouched(out)
                self.assertTrue((keep == 0xAA).all())
        with self.assertRaises(softmax.SoftmaxError) as cm:
            softmax.dropout(x, 1.5, 1)
        self.assertIn("got 1.5", cm.exception.message)
        with self.assertRaises(TypeError):
            softmax.dropout(x, None, 1)

    def test_seed_offset_and_thread_ranges(self):
        x = np.ones((2, 4), np.float32)
        with self.assertRaisesRegex(ValueError, "seed must lie in"):
            softmax.dropout(x, 0.5, -1)
        with self.assertRaisesRegex(ValueError, "offset must lie in"):
            softmax.dropout(x, 0.5, 1, 2 ** 64)
        with self.assertRaisesRegex(TypeError, "seed must be an integer"):
            softmax.dropout(x, 0.5, 1.5)
        with self.assertRaisesRegex(ValueError, "num_threads must lie in"):
            softmax.rows(x, num_threads=2 ** 31)
        softmax.dropout(x, 0.5, 2 ** 64 - 1, 2 ** 64 - 1)  # the full uint64 range is usable

    def test_bad_options_are_reported_by_the_library(self):
        x = np.ones((2, 4), np.float32)
        out = poisoned((2, 4))
        with self.assertRaises(softmax.SoftmaxError) as cm:
            softmax.rows(x, out=out, num_threads=-1)
        self.assertStatus(cm, "INVALID_OPTIONS", "num_threads must be >= 0")
        with self.assertRaises(softmax.SoftmaxError) as cm:
            softmax.rows(x, out=out, backend=7)
        self.assertStatus(cm, "INVALID_BACKEND", "options->backend is 7")
        with self.assertRaisesRegex(ValueError, "backend must be one of"):
            softmax.rows(x, backend="gpu")
        self.assertUntouched(out)

    def test_partial_overlap_is_reported_by_the_library(self):
        buf = np.zeros(9, np.float32)
        with self.assertRaises(softmax.SoftmaxError) as cm:
            softmax.rows(buf[:8].reshape(2, 4), out=buf[1:].reshape(2, 4))
        self.assertStatus(cm, "OVERLAPPING_BUFFERS", "x and y overlap")

    def test_host_memory_on_the_cuda_backend(self):
        x = np.ones((2, 4), np.float32)
        out = poisoned((2, 4))
        with self.assertRaises(softmax.SoftmaxError) as cm:
            softmax.rows(x, out=out, backend="cuda")
        want = "WRONG_MEMORY_SPACE" if softmax.backend_available("cuda") else "BACKEND_UNAVAILABLE"
        self.assertStatus(cm, want)
        self.assertTrue(cm.exception.message)
        self.assertUntouched(out)


if __name__ == "__main__":
    unittest.main()
