"""softmax with torch tensors: host tensors (all three dtypes) and, on a machine with a GPU and a
CUDA-built libsoftmax, CUDA tensors through __cuda_array_interface__ on torch's current stream.

Not collected by `unittest discover` (the name does not start with test_): run it with
run_torch_cases.py, which exits 77 (ctest: skipped) when torch, a GPU or the library's CUDA
backend is missing, and says which.
"""
import unittest

import numpy as np

import softmax
from support import assert_close, reference

try:
    import torch
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

DTYPES = ["float32", "float16", "bfloat16"]


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
        with self.assertRaisesRegex(ValueError, "float32, float16 or bfloat16"):
            softmax.rows(torch.zeros(4, 6, dtype=torch.float64))


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
