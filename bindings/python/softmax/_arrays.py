"""Reads an array object's memory description: pointer, shape, dtype, device, stream.

numpy (and anything else on the host) through __array_interface__; torch, cupy, numba and other
GPU arrays through __cuda_array_interface__ (zero-copy, honouring its "stream" entry). Host torch
tensors offer neither interface, so they are read through torch's own accessors. Only
C-contiguous 1-D (one row) or 2-D arrays of float32, float16 or bfloat16 are accepted.
"""
import sys

DTYPE_F32, DTYPE_F16, DTYPE_BF16 = 0, 1, 2  # softmax_dtype values
MASK_U8 = "uint8"  # the keep-mask's element type (not a softmax_dtype)
DTYPE_NAMES = {DTYPE_F32: "float32", DTYPE_F16: "float16", DTYPE_BF16: "bfloat16", MASK_U8: "uint8"}
_ITEMSIZE = {DTYPE_F32: 4, DTYPE_F16: 2, DTYPE_BF16: 2, MASK_U8: 1}
_TYPESTRS = {"<f4": DTYPE_F32, "<f2": DTYPE_F16, "|u1": MASK_U8}
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


def _wrong_dtype(what, dtype, mask):
    wanted = "uint8" if mask else "float32, float16 or bfloat16"
    return ValueError("%s has dtype %s; libsoftmax takes %s" % (what, dtype, wanted))


def _dtype_from_typestr(obj, typestr, what, mask):
    dtype = _TYPESTRS.get(typestr)
    if dtype is None and typestr in _VOID2 and _names_bfloat16(obj):
        dtype = DTYPE_BF16
    if dtype is None or (dtype == MASK_U8) != mask:
        raise _wrong_dtype(what, "%s (typestr %r)" % (getattr(obj, "dtype", "?"), typestr), mask)
    return dtype


def _from_interface(obj, iface, what, cuda, mask):
    shape = tuple(int(n) for n in iface["shape"])
    dtype = _dtype_from_typestr(obj, iface["typestr"], what, mask)
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


def _from_torch(torch, obj, what, mask):
    if mask:
        dtypes = {torch.uint8: MASK_U8}
    else:
        dtypes = {torch.float32: DTYPE_F32, torch.float16: DTYPE_F16, torch.bfloat16: DTYPE_BF16}
    if obj.dtype not in dtypes:
        raise _wrong_dtype(what, obj.dtype, mask)
    if obj.layout != torch.strided:
        raise ValueError("%s is a %s tensor; libsoftmax takes dense tensors" % (what, obj.layout))
    dtype = dtypes[obj.dtype]
    shape = tuple(obj.shape)
    itemsize = _ITEMSIZE[dtype]
    _check_shape_and_layout(shape, tuple(s * itemsize for s in obj.stride()), itemsize, what)
    cuda = obj.device.type == "cuda"
    stream = torch.cuda.current_stream(obj.device).cuda_stream if cuda else None
    return ArrayView(obj, obj.data_ptr(), shape, dtype, cuda, stream, False)


def describe(obj, what, mask=False):
    """An ArrayView of obj, or ValueError/TypeError saying why obj cannot be passed. With
    mask=True obj must be a uint8 keep-mask instead of a float array."""
    iface = _interface(obj, "__cuda_array_interface__", what)
    if iface is not None:
        return _from_interface(obj, iface, what, True, mask)
    iface = _interface(obj, "__array_interface__", what)
    if iface is not None:
        return _from_interface(obj, iface, what, False, mask)
    torch = _torch_module(obj)
    if torch is not None:
        return _from_torch(torch, obj, what, mask)
    raise TypeError("%s must be an array (numpy, torch, cupy, or anything with "
                    "__array_interface__ or __cuda_array_interface__), got %s"
                    % (what, type(obj).__name__))


def empty_like(view, uint8=False):
    """A new C-contiguous array of view's shape, on its device, from its own library."""
    obj = view.obj
    torch = _torch_module(obj)
    if torch is not None:
        return torch.empty(view.shape, dtype=torch.uint8 if uint8 else obj.dtype,
                           device=obj.device)
    module = sys.modules.get(type(obj).__module__.split(".")[0])
    ndarray = getattr(module, "ndarray", None)
    if isinstance(ndarray, type) and isinstance(obj, ndarray) and hasattr(module, "empty"):
        # numpy and cupy: same call, host or device.
        return module.empty(view.shape, dtype=module.uint8 if uint8 else obj.dtype)
    raise ValueError("cannot allocate an output like a %s; pass out= (and keep_mask=)"
                     % type(obj).__name__)
