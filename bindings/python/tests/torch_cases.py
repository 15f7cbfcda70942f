# SPDX-License-Identifier: Apache-2.0
"""softmax with torch tensors: host tensors (every dtype), the softmax.torch autograd wrappers
against torch's own gradients and, on a machine with a GPU and a CUDA-built libsoftmax, CUDA
tensors through __cuda_array_interface__ on torch's current stream.

Not collected by `unittest discover` (the name does not start with test_): run it with
run_torch_cases.py, which exits 77 (ctest: skipped) when torch, a GPU or the library's CUDA
backend is missing, and says which.
"""
import unittest

import numpy as np

import softmax
from support import assert_close, backward_tolerance, reference, tolerance

try:
    import torch
    import torch.nn.functional as F

    import softmax.torch as st
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

NO_TORCH = "torch is not installed for this python"
NO_CUDA = None
if torch is None:
    NO_CUDA = NO_TORCH
elif not torch.cuda.is_available():
    NO_CUDA = "torch sees no CUDA device"
elif not softmax.backend_available("cuda"):
    NO_CUDA = "this libsoftmax has no usable CUDA backend (built with SOFTMAX_WITH_CUDA=OFF?)"

DTYPES = ["float32", "float16", "bfloat16", "float64"]


def to64(t):
    return t.detach().to("cpu", torch.float64).numpy()


@unittest.skipIf(torch is None, NO_TORCH)
class TorchHost(unittest.TestCase):
    def test_all_dtypes_against_reference(self):
        g = torch.Generator().manual_seed(1)
        for name in DTYPES:
            for log in (False, True):
                with self.subTest(dtype=name, log=log):
                    x = (torch.rand(17, 1000, generator=g) * 16 - 8).to(getattr(torch, name))
                    y = softmax.rows(x, log=log)
                    self.assertIsInstance(y, torch.Tensor)
                    self.assertEqual((y.dtype, y.shape), (x.dtype, x.shape))
                    assert_close(self, to64(y), reference(to64(x), log), name, log)

    def test_non_contiguous_tensor_is_refused(self):
        with self.assertRaisesRegex(ValueError, "C-contiguous"):
            softmax.rows(torch.zeros(4, 6).t())
        with self.assertRaisesRegex(ValueError, "float32, float16, bfloat16 or float64"):
            softmax.rows(torch.zeros(4, 6, dtype=torch.int32))

    def test_numpy_style_functions_take_tensors_along_any_dim(self):
        g = torch.Generator().manual_seed(3)
        x = torch.rand(5, 300, 7, generator=g) * 16 - 8
        for dim in (0, 1, 2):
            y = softmax.softmax(x, dim, dtype=torch.float16)
            self.assertEqual((y.dtype, y.shape), (torch.float16, x.shape))
            assert_close(self, to64(y.movedim(dim, -1)),
                         reference(to64(x.movedim(dim, -1))), "float16")
        empty = softmax.log_softmax(torch.zeros(0, 3))
        self.assertEqual(tuple(empty.shape), (0, 3))


class AutogradCases:
    """softmax.torch's forward values and gradients against torch.softmax / log_softmax and
    F.dropout(torch.softmax(...)) evaluated in float64 on the same stored inputs; run on the host
    (TorchAutogradHost) and, where there is one, on a GPU (TorchAutogradCuda)."""

    device = None
    SHAPES = [((1, 1), -1), ((7, 33), -1), ((64, 1000), -1), ((3, 5000), 0), ((4, 50, 6), 1)]

    def rand(self, shape, dtype, lo=-8.0, hi=8.0):
        return (torch.rand(*shape, generator=self.g, device=self.device, dtype=torch.float64)
                * (hi - lo) + lo).to(dtype)

    def sync(self):
        if self.device == "cuda":
            torch.cuda.synchronize()

    def reference_grad(self, fn, x, dy):
        """(y, dx) of fn on the float64 copy of x, by torch autograd."""
        x64 = x.detach().to(torch.float64).requires_grad_()
        y64 = fn(x64)
        y64.backward(dy.to(torch.float64))
        return y64.detach(), x64.grad

    def check_grad(self, x, dx64, y64, dy, dim, log, y_rounding):
        """x.grad against torch's float64 gradient dx64 (y64: torch's float64 forward)."""
        name = str(x.dtype).rpartition(".")[2]
        move = lambda t: to64(t.movedim(dim, -1))  # noqa: E731
        tol = backward_tolerance(name, move(y64), move(dy), log, y_rounding=y_rounding)
        assert_close(self, move(x.grad), move(dx64), name, tol=tol)

    def test_softmax_and_log_softmax_gradients(self):
        for dtype in (torch.float32, torch.bfloat16):
            name = str(dtype).rpartition(".")[2]
            for shape, dim in self.SHAPES:
                for log in (False, True):
                    with self.subTest(dtype=name, shape=shape, dim=dim, log=log):
                        x = self.rand(shape, dtype).requires_grad_()
                        dy = self.rand(shape, dtype, -1.0, 1.0)
                        y = st.softmax(x, dim=dim, log=log)
                        self.assertEqual((y.dtype, y.shape, y.requires_grad),
                                         (dtype, x.shape, True))
                        y.backward(dy)
                        self.sync()
                        torch_fn = torch.log_softmax if log else torch.softmax
                        y64, dx64 = self.reference_grad(lambda t: torch_fn(t, dim), x, dy)
                        assert_close(self, to64(y.movedim(dim, -1)), to64(y64.movedim(dim, -1)),
                                     name, log)
                        self.assertEqual(x.grad.dtype, dtype)
                        # the library differentiates through its stored (rounded) y
                        rounding = tolerance(name, 1.0, False, shape[dim])
                        self.check_grad(x, dx64, y64, dy, dim, log, rounding)

    def test_result_dtype_and_gradient_dtype(self):
        # Mixed precision: y stored as dtype=, the gradient as x.
        x = self.rand((16, 700), torch.float32).requires_grad_()
        y = st.softmax(x, dtype=torch.bfloat16)
        self.assertEqual(y.dtype, torch.bfloat16)
        dy = self.rand(y.shape, torch.bfloat16, -1.0, 1.0)
        y.backward(dy)
        self.sync()
        self.assertEqual(x.grad.dtype, torch.float32)
        y64, dx64 = self.reference_grad(lambda t: torch.softmax(t, -1), x, dy)
        self.check_grad(x, dx64, y64, dy, -1, False, tolerance("bfloat16", 1.0, False, 700))

    def test_in_place_forward_and_backward(self):
        # The plain functions write over their input: out=x forward, out=dy backward.
        x = self.rand((32, 513), torch.float32)
        want = torch.softmax(x.double(), -1)
        self.assertIs(softmax.softmax(x, out=x), x)
        dy = self.rand(x.shape, torch.float32, -1.0, 1.0)
        want_dx = x.double() * (dy.double() - (dy.double() * x.double()).sum(-1, keepdim=True))
        self.assertIs(softmax.softmax_backward(x, dy, out=dy), dy)
        self.sync()
        assert_close(self, to64(x), to64(want), "float32")
        assert_close(self, to64(dy), to64(want_dx), "float32",
                     tol=backward_tolerance("float32", to64(x), to64(dy), False) * 4 + 1e-7)

    def test_dropout_gradient_matches_torch_with_the_librarys_mask(self):
        for dtype in (torch.float32, torch.bfloat16):
            name = str(dtype).rpartition(".")[2]
            for shape, dim in self.SHAPES:
                with self.subTest(dtype=name, shape=shape, dim=dim):
                    p, seed, offset = 0.2, 1234, 5
                    x = self.rand(shape, dtype).requires_grad_()
                    z = st.softmax_dropout(x, p, seed, offset, dim=dim)
                    _, mask = softmax.softmax_dropout(x.detach(), p, seed, offset, dim,
                                                      return_mask=True)
                    dy = self.rand(shape, dtype, -1.0, 1.0)
                    z.backward(dy)
                    self.sync()
                    # torch's reference: F.dropout(softmax(x)) with the library's keep mask,
                    # i.e. softmax(x) * mask / (1 - p).
                    keep = mask.to(torch.float64)
                    z64, dx64 = self.reference_grad(
                        lambda t: torch.softmax(t, dim) * keep / (1 - p), x, dy)
                    self.assertTrue(bool((z.detach()[mask == 0] == 0).all()))
                    assert_close(self, to64(z.movedim(dim, -1)), to64(z64.movedim(dim, -1)),
                                 name)
                    s64 = torch.softmax(x.detach().double(), dim)
                    g = dy.double() * keep / (1 - p)
                    tol = backward_tolerance(name, to64(s64.movedim(dim, -1)),
                                             to64(g.movedim(dim, -1)), False,
                                             y_rounding=tolerance("float32", 1.0, False,
                                                                  shape[dim]))
                    assert_close(self, to64(x.grad.movedim(dim, -1)),
                                 to64(dx64.movedim(dim, -1)), name, tol=tol)

    def test_dropout_p_zero_is_softmax_and_f_dropout_agrees_in_distribution(self):
        x = self.rand((8, 4096), torch.float32).requires_grad_()
        z = st.softmax_dropout(x, 0.0, 1, 2)
        assert_close(self, to64(z), to64(torch.softmax(x.detach().double(), -1)), "float32")
        kept = (st.softmax_dropout(x, 0.5, 3, 4) != 0).double().mean().item()
        torch_kept = (F.dropout(torch.ones(8, 4096, device=self.device), 0.5) != 0).double()
        self.assertLess(abs(kept - torch_kept.mean().item()), 0.05)

    def test_second_derivative_is_refused(self):
        x = self.rand((2, 8), torch.float32).requires_grad_()
        (g,) = torch.autograd.grad(st.softmax(x).pow(2).sum(), x, create_graph=True)
        with self.assertRaises(RuntimeError):
            g.sum().backward()


@unittest.skipIf(torch is None, NO_TORCH)
class TorchAutogradHost(AutogradCases, unittest.TestCase):
    device = "cpu"

    def setUp(self):
        self.g = torch.Generator().manual_seed(4)


@unittest.skipIf(NO_CUDA is not None, NO_CUDA or "")
class TorchAutogradCuda(AutogradCases, unittest.TestCase):
    device = "cuda"

    def setUp(self):
        self.g = torch.Generator(device="cuda").manual_seed(5)


@unittest.skipIf(NO_CUDA is not None, NO_CUDA or "")
class TorchCuda(unittest.TestCase):
    def setUp(self):
        self.g = torch.Generator(device="cuda").manual_seed(2)

    def rand(self, shape, dtype):
        return (torch.rand(*shape, device="cuda", generator=self.g) * 16 - 8).to(dtype)

    def test_all_dtypes_and_shapes_match_the_reference(self):
        for name in DTYPES:
            dtype = getattr(torch, name)
            for shape in [(1, 1), (7, 33), (64, 1024), (3, 70000), (4096, 128)]:
                for log in (False, True):
                    with self.subTest(dtype=name, shape=shape, log=log):
                        x = self.rand(shape, dtype)
                        y = softmax.rows(x, log=log)
                        self.assertTrue(y.is_cuda)
                        torch.cuda.synchronize()
                        assert_close(self, to64(y), reference(to64(x), log), name, log)

    def test_in_place_and_one_dimensional(self):
        x = self.rand((100000,), torch.float32)
        want = reference(to64(x))
        y = softmax.rows(x, out=x)
        self.assertIs(y, x)
        torch.cuda.synchronize()
        assert_close(self, to64(x), want, "float32")

    def test_runs_on_torchs_current_stream(self):
        # Work queued on a side stream must see the input written earlier on that stream, and
        # the result must be ready once that stream is synchronised, without a device-wide sync.
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = self.rand((2048, 4096), torch.float32)
            y = softmax.rows(x)
            ref = torch.softmax(x.double(), dim=1)
        s.synchronize()
        assert_close(self, y.double().cpu().numpy(), ref.cpu().numpy(), "float32")

    def test_stream_entry_of_the_interface_is_used(self):
        # A v3 interface that names a stream: the call must be queued on that stream.
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = self.rand((512, 1000), torch.float32)
        out = torch.empty_like(x)

        class Exported:
            def __init__(self, t):
                self.t = t
                iface = dict(t.__cuda_array_interface__)
                iface.update(version=3, stream=s.cuda_stream)
                self.__cuda_array_interface__ = iface

        softmax.rows(Exported(x), out=Exported(out))
        s.synchronize()
        assert_close(self, to64(out), reference(to64(x)), "float32")

    def test_dropout_mask_is_identical_on_cpu_and_gpu(self):
        x = self.rand((64, 1000), torch.float32)
        y_gpu, m_gpu = softmax.dropout(x, 0.1, 42, 3, return_mask=True)
        y_cpu, m_cpu = softmax.dropout(x.cpu().numpy(), 0.1, 42, 3, return_mask=True)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(m_gpu.cpu().numpy(), m_cpu)
        tol = 4e-6 * np.abs(y_cpu) + 1e-30
        self.assertTrue((np.abs(y_gpu.cpu().numpy() - y_cpu) <= tol).all())

    def test_bfloat16_dropout(self):
        x = self.rand((8, 4096), torch.bfloat16)
        y, m = softmax.dropout(x, 0.5, 7, 0, return_mask=True)
        torch.cuda.synchronize()
        self.assertEqual((y.dtype, m.dtype), (torch.bfloat16, torch.uint8))
        self.assertTrue((y[m == 0] == 0).all())

    def test_host_out_for_a_device_x_is_refused_by_the_library(self):
        x = self.rand((4, 8), torch.float32)
        with self.assertRaises(softmax.SoftmaxError) as cm:
            softmax.rows(x, out=torch.empty(4, 8))
        self.assertEqual(cm.exception.status_name, "SOFTMAX_STATUS_WRONG_MEMORY_SPACE")

    def test_tensor_that_requires_grad_is_read_through_torch(self):
        # torch refuses __cuda_array_interface__ for such tensors; its own accessors still work.
        x = self.rand((4, 8), torch.float32).requires_grad_()
        y = softmax.rows(x)
        torch.cuda.synchronize()
        assert_close(self, to64(y), reference(to64(x)), "float32")


if __name__ == "__main__":
    unittest.main()
