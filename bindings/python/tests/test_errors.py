# SPDX-License-Identifier: Apache-2.0
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
        for dtype in (np.int32, np.uint16, np.complex64, np.float128):
            with self.subTest(dtype=dtype):
                with self.assertRaises(ValueError) as cm:
                    softmax.rows(np.zeros((2, 3), dtype=dtype))
                self.assertIn("float32, float16, bfloat16 or float64", str(cm.exception))
                with self.assertRaises(ValueError):
                    softmax.softmax(np.zeros((2, 3), dtype=dtype))
        with self.assertRaisesRegex(ValueError,
                                    "out has dtype float16 but dtype=float32 was asked for"):
            softmax.rows(np.zeros((2, 3), np.float32), out=np.zeros((2, 3), np.float16),
                         dtype="float32")
        with self.assertRaisesRegex(ValueError, "mask has dtype .*takes uint8"):
            softmax.dropout(np.zeros((2, 3), np.float32), 0.5, 1, mask=np.zeros((2, 3), np.int8))
        # A 2-byte void that does not call itself bfloat16 is not guessed at.
        void = np.zeros((2, 3), dtype="V2")
        with self.assertRaisesRegex(ValueError, "float32, float16, bfloat16 or float64"):
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

    def test_empty_call_reads_no_pointer(self):
        class EmptyNullArray:  # an empty array may have no memory at all
            __array_interface__ = {"shape": (0, 4), "typestr": "<f4", "data": (0, False),
                                   "version": 3}
        empty = EmptyNullArray()
        self.assertIs(softmax.rows(empty, out=empty), empty)

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
        for p in ("0.1", True, [0.1]):
            with self.subTest(p=p):
                with self.assertRaisesRegex(TypeError, "p must be a real number"):
                    softmax.dropout(x, p, 1)
                with self.assertRaisesRegex(TypeError, "p must be a real number"):
                    softmax.softmax_dropout(x, p, 1)
                with self.assertRaisesRegex(TypeError, "p must be a real number"):
                    softmax.dropout_backward(x, x, p, 1)
        with self.assertRaises(softmax.SoftmaxArgumentError) as cm:
            softmax.dropout_backward(x, x, 2, 1, out=poisoned((2, 4)))
        self.assertStatus(cm, "INVALID_PROBABILITY", "got 2")

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

    def test_argument_types(self):
        x = np.ones((2, 4), np.float32)
        for call in (lambda: softmax.rows(x, log="yes"), lambda: softmax.rows(x, log=1),
                     lambda: softmax.softmax_backward(x, x, log=None),
                     lambda: softmax.rows_from_stats(x, x[:, 0], x[:, 0], log="no")):
            with self.assertRaisesRegex(TypeError, "log must be True or False"):
                call()
        with self.assertRaisesRegex(TypeError, "axis must be an integer"):
            softmax.softmax(x, axis=1.0)
        with self.assertRaisesRegex(ValueError, "axis 2 is out of range"):
            softmax.log_softmax(x, axis=2)
        with self.assertRaisesRegex(ValueError, "axis -3 is out of range"):
            softmax.softmax_backward(x, x, axis=-3)
        with self.assertRaisesRegex(TypeError, "must be a numpy, cupy or torch array"):
            softmax.softmax([[1.0, 2.0]])
        with self.assertRaisesRegex(TypeError, "must be a numpy, cupy or torch array"):
            softmax.softmax_backward(x, [[1.0] * 4] * 2)
        with self.assertRaisesRegex(TypeError, "unexpected keyword"):
            softmax.softmax(x, dim=0)

    def test_dtype_arguments(self):
        x = np.ones((2, 4), np.float32)
        for bad in (5, 1.5, object(), [np.float32]):
            with self.subTest(dtype=bad):
                with self.assertRaisesRegex(TypeError, "dtype must be a dtype"):
                    softmax.softmax(x, dtype=bad)
        for bad in ("int8", "float128", "nonsense", np.int64, np.dtype("c8"), bool):
            with self.subTest(dtype=bad):
                with self.assertRaisesRegex(ValueError, "not a storage type of libsoftmax"):
                    softmax.rows(x, dtype=bad)
        with self.assertRaisesRegex(ValueError, "dy has dtype float16 but y has dtype float32"):
            softmax.softmax_backward(x, x.astype(np.float16))
        # dx mirrors x, so dropout_backward cannot store it as anything else.
        with self.assertRaisesRegex(ValueError, r"out is stored as x \(float32\), so it cannot "
                                    "be float16"):
            softmax.dropout_backward(x, x, 0.5, 1, dtype="float16")
        with self.assertRaisesRegex(ValueError, "row_max has dtype float64 .*; libsoftmax "
                                    "takes float32"):
            softmax.rows_from_stats(x, np.zeros(2), np.ones(2, np.float32))

    def test_shapes_must_agree(self):
        x = np.ones((2, 4), np.float32)
        with self.assertRaisesRegex(ValueError, r"dy has shape \(4, 2\) but must have shape "
                                    r"\(2, 4\)"):
            softmax.softmax_backward(x, x.T.copy())
        with self.assertRaisesRegex(ValueError, r"out has shape \(2, 4, 1\)"):
            softmax.softmax(x, out=np.empty((2, 4, 1), np.float32))
        with self.assertRaisesRegex(ValueError, r"row_dot has shape \(4,\) but must have "
                                    r"shape \(2,\)"):
            softmax.rows_backward_from_stats(x, x, np.ones(4, np.float32))
        with self.assertRaisesRegex(ValueError, r"row_sumexp has shape \(2,\) but must have "
                                    r"shape \(4,\)"):
            softmax.rows_from_stats(x, np.ones(4, np.float32), np.ones(2, np.float32), axis=0)

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
