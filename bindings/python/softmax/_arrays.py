# SPDX-License-Identifier: Apache-2.0
"""Reads an array object's memory description: pointer, shape, dtype, device, stream; and
allocates new arrays of the same kind.

numpy (and anything else on the host) through __array_interface__; torch, cupy, numba and other
GPU arrays through __cuda_array_interface__ (zero-copy, honouring its "stream" entry). Host torch
tensors offer neither interface, so they are read through torch's own accessors. Only
C-contiguous 1-D (one row) or 2-D arrays are accepted: of float32, float16, bfloat16 or float64
(the storage types), uint8 (a keep-mask) or float32 (per-row statistics), as the caller asks.
"""
import sys

from . import _dtypes
from ._dtypes import BF16, F16, F32, F64

# Element kinds that describe() checks for, besides a storage type (FLOAT):
FLOAT = "float"  # any softmax_dtype
MASK_U8 = "uint8"  # the keep-mask's element type (not a softmax_dtype)
STATS_F32 = "stats"  # per-row statistics: C float arrays
DTYPE_NAMES = dict(_dtypes.NAMES, **{MASK_U8: "uint8"})
_ITEMSIZE = dict(_dtypes.ITEMSIZE, **{MASK_U8: 1})
_TYPESTRS = {"<f4": F32, "<f2": F16, "<f8": F64, "|u1": MASK_U8}
_WANTED = {FLOAT: _dtypes.SUPPORTED, MASK_U8: "uint8", STATS_F32: "float32"}
# No standard typestr names bfloat16: torch (and ml_dtypes) export it as a 2-byte void, "<V2".
# A void is only taken for bfloat16 when the object's own dtype says so.
_VOID2 = ("<V2", "|V2")


class ArrayView:
    """What the C call needs from one array argument."""

    __slots__ = ("obj", "ptr", "shape", "rows", "cols", "dtype", "cuda", "stream", "readonly")

    def __init__(self, obj, ptr, shape, dtype, cuda, stream, readonly):
        self.obj = obj
        self.ptr = ptr
        self.shape = shape
        self.rows, self.cols = (1, shape[0]) if len(shape) == 1 else shape
        self.dtype = dtype
        self.cuda = cuda
        self.stream = stream
        self.readonly = readonly


def _torch_module(obj):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return torch
    return None


def _names_bfloat16(obj):
    return "bfloat16" in str(getattr(obj, "dtype", ""))


def _interface(obj, name, what):
    try:
        return getattr(obj, name, None)
    except (RuntimeError, TypeError, KeyError) as e:
        # torch raises RuntimeError for tensors that require grad; old versions KeyError for
        # dtypes they cannot name.
        if _torch_module(obj) is not None:
            return None  # read through torch's accessors below
        raise ValueError("%s: cannot read %s: %s" % (what, name, e)) from e


def _check_shape_and_layout(shape, strides, itemsize, what):
    if len(shape) not in (1, 2):
        raise ValueError("%s must be 1-D (one row) or 2-D [rows, cols], got shape %s"
                         % (what, tuple(shape)))
    if strides is None:
        return
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent != 1 and stride != expected:
            raise ValueError("%s must be C-contiguous (row-major, densely packed), got shape %s "
                             "with strides %s bytes" % (what, tuple(shape), tuple(strides)))
        expected *= extent


def _wrong_dtype(what, dtype, kind):
    return ValueError("%s has dtype %s; libsoftmax takes %s" % (what, dtype, _WANTED[kind]))


def _check_kind(dtype, kind, what, shown):
    ok = {FLOAT: dtype in _dtypes.NAMES, MASK_U8: dtype == MASK_U8, STATS_F32: dtype == F32}[kind]
    if not ok:
        raise _wrong_dtype(what, shown, kind)
    return dtype


def _dtype_from_typestr(obj, typestr, what, kind):
    dtype = _TYPESTRS.get(typestr)
    if dtype is None and typestr in _VOID2 and _names_bfloat16(obj):
        dtype = BF16
    return _check_kind(dtype, kind, what, "%s (typestr %r)" % (getattr(obj, "dtype", "?"), typestr))


def _from_interface(obj, iface, what, cuda, kind):
    shape = tuple(int(n) for n in iface["shape"])
    dtype = _dtype_from_typestr(obj, iface["typestr"], what, kind)
    _check_shape_and_layout(shape, iface.get("strides"), _ITEMSIZE[dtype], what)
    if iface.get("mask") is not None:
        raise ValueError("%s is a masked array; libsoftmax takes plain arrays" % what)
    data = iface.get("data")
    if not isinstance(data, tuple):
        raise ValueError("%s: __array_interface__ without a (pointer, read-only) data tuple is "
                         "not supported" % what)
    ptr, readonly = int(data[0]), bool(data[1])
    ptr += int(iface.get("offset", 0) or 0)
    stream = None
    if cuda:
        # CUDA Array Interface v3: None = no synchronisation needed, 1 = legacy default stream,
        # 2 = per-thread default stream, anything else a cudaStream_t. 1 and 2 are also the
        # values of cudaStreamLegacy and cudaStreamPerThread, so the value is passed on as is.
        # torch omits the entry (interface version 2): its work is ordered on torch's current
        # stream, so that is the stream to run on.
        stream = iface.get("stream")
        torch = _torch_module(obj)
        if "stream" not in iface and torch is not None:
            stream = torch.cuda.current_stream(obj.device).cuda_stream
    return ArrayView(obj, ptr, shape, dtype, cuda, stream, readonly)


def _torch_dtypes(torch):
    return {torch.float32: F32, torch.float16: F16, torch.bfloat16: BF16, torch.float64: F64,
            torch.uint8: MASK_U8}


def _from_torch(torch, obj, what, kind):
    dtype = _check_kind(_torch_dtypes(torch).get(obj.dtype), kind, what, obj.dtype)
    if obj.layout != torch.strided:
        raise ValueError("%s is a %s tensor; libsoftmax takes dense tensors" % (what, obj.layout))
    shape = tuple(obj.shape)
    itemsize = _ITEMSIZE[dtype]
    _check_shape_and_layout(shape, tuple(s * itemsize for s in obj.stride()), itemsize, what)
    cuda = obj.device.type == "cuda"
    stream = torch.cuda.current_stream(obj.device).cuda_stream if cuda else None
    return ArrayView(obj, obj.data_ptr(), shape, dtype, cuda, stream, False)


def dtype_of(obj, what, kind=FLOAT):
    """The element type of the array object obj (checked against kind), whatever its layout."""
    for name in ("__cuda_array_interface__", "__array_interface__"):
        iface = _interface(obj, name, what)
        if iface is not None:
            return _dtype_from_typestr(obj, iface["typestr"], what, kind)
    torch = _torch_module(obj)
    if torch is not None:
        return _check_kind(_torch_dtypes(torch).get(obj.dtype), kind, what, obj.dtype)
    raise TypeError("%s must be an array, got %s" % (what, type(obj).__name__))


def describe(obj, what, kind=FLOAT):
    """An ArrayView of obj, or ValueError/TypeError saying why obj cannot be passed. kind says
    which elements obj must hold: FLOAT (a storage type), MASK_U8 or STATS_F32."""
    iface = _interface(obj, "__cuda_array_interface__", what)
    if iface is not None:
        return _from_interface(obj, iface, what, True, kind)
    iface = _interface(obj, "__array_interface__", what)
    if iface is not None:
        return _from_interface(obj, iface, what, False, kind)
    torch = _torch_module(obj)
    if torch is not None:
        return _from_torch(torch, obj, what, kind)
    raise TypeError("%s must be an array (numpy, torch, cupy, or anything with "
                    "__array_interface__ or __cuda_array_interface__), got %s"
                    % (what, type(obj).__name__))


def _numpy_like_dtype(module, dtype):
    """module's dtype object for a storage type or MASK_U8 (numpy and cupy share the names)."""
    if dtype != BF16:
        return getattr(module, DTYPE_NAMES[dtype])
    if module.__name__ == "numpy":
        try:
            import ml_dtypes  # numpy's bfloat16 comes from ml_dtypes, when it is installed
        except ImportError:
            ml_dtypes = None
        if ml_dtypes is not None:
            return ml_dtypes.bfloat16
    raise ValueError("%s has no bfloat16 array type (numpy gets one from the ml_dtypes package); "
                     "pass out= or use torch" % module.__name__)


def empty(like, shape, dtype):
    """A new C-contiguous array of `shape` holding `dtype` (a storage type, MASK_U8 or
    STATS_F32), of the same kind and on the same device as the array object `like`."""
    if dtype == STATS_F32:
        dtype = F32
    torch = _torch_module(like)
    if torch is not None:
        names = {code: t for t, code in _torch_dtypes(torch).items()}
        return torch.empty(shape, dtype=names[dtype], device=like.device)
    module = sys.modules.get(type(like).__module__.split(".")[0])
    ndarray = getattr(module, "ndarray", None)
    if isinstance(ndarray, type) and isinstance(like, ndarray) and hasattr(module, "empty"):
        # numpy and cupy: same call, host or device.
        return module.empty(shape, dtype=_numpy_like_dtype(module, dtype))
    raise ValueError("cannot allocate an output like a %s; pass out= (and mask=)"
                     % type(like).__name__)
