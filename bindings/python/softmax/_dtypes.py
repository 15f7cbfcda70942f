# SPDX-License-Identifier: Apache-2.0
"""Storage types: the softmax_dtype codes, their names, and how a dtype= argument names one.

A dtype= argument may be a name ("float32", "float16", "bfloat16", "float64"), a numpy dtype or
scalar type (np.float16, np.dtype("<f8"), ml_dtypes.bfloat16), or a torch dtype (torch.bfloat16).
Something that is not a dtype at all is a TypeError; a dtype the library does not store (int32,
complex64, ...) or an unknown name is a ValueError.
"""
import sys

F32, F16, BF16, F64 = 0, 1, 2, 3  # softmax_dtype values
NAMES = {F32: "float32", F16: "float16", BF16: "bfloat16", F64: "float64"}
CODES = {name: code for code, name in NAMES.items()}
ITEMSIZE = {F32: 4, F16: 2, BF16: 2, F64: 8}
SUPPORTED = "float32, float16, bfloat16 or float64"


def _not_stored(name):
    return ValueError("dtype %s is not a storage type of libsoftmax, which takes %s"
                      % (name, SUPPORTED))


def code_of(spec):
    """The softmax_dtype code that a dtype= argument names."""
    if isinstance(spec, str) and spec in CODES:
        return CODES[spec]
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(spec, torch.dtype):
        name = str(spec).rpartition(".")[2]  # "torch.bfloat16" -> "bfloat16"
        if name not in CODES:
            raise _not_stored(spec)
        return CODES[name]
    if spec is None or isinstance(spec, (bool, int, float)):
        # numpy would read None as float64 and accept Python scalar types' instances: neither
        # names a dtype here.
        raise TypeError("dtype must be a dtype or a dtype name (%s), got %r" % (SUPPORTED, spec))
    np = sys.modules.get("numpy")
    if np is None:
        if isinstance(spec, str):
            raise _not_stored(repr(spec))
        raise TypeError("dtype must be a dtype or a dtype name (%s), got %r" % (SUPPORTED, spec))
    try:
        name = np.dtype(spec).name
    except TypeError as e:
        if isinstance(spec, str):
            raise _not_stored(repr(spec)) from None
        raise TypeError("dtype must be a dtype or a dtype name (%s), got %r"
                        % (SUPPORTED, spec)) from e
    if name not in CODES:
        raise _not_stored(name)
    return CODES[name]
