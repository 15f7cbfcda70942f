# SPDX-License-Identifier: Apache-2.0
"""libsoftmax's C API through ctypes, for the tuning tools beside this file (gpu_sweep.py,
cpu_ab.py): the options struct of include/softmax/softmax.h and a library loaded with the
signatures of the functions they call."""
import ctypes


class Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("backend", ctypes.c_int), ("flags", ctypes.c_uint32),
                ("stream", ctypes.c_void_p), ("num_threads", ctypes.c_int32), ("y_dtype", ctypes.c_int)]


def load(path):
    """The library at `path`, loaded on its own (RTLD_LOCAL: copies of one build load side by side)."""
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    p, i64, i32, f32, u64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_float, ctypes.c_uint64
    o = ctypes.POINTER(Options)
    sig = {
        "softmax_rows": [p, p, i64, i64, i32, o],
        "softmax_dropout": [p, p, p, i64, i64, i32, f32, u64, u64, o],
        "softmax_rows_backward": [p, p, p, i64, i64, i32, o],
        "softmax_dropout_backward": [p, p, p, i64, i64, i32, f32, u64, u64, o],
        "softmax_row_stats": [p, p, p, i64, i64, i32, o],
    }
    for name, args in sig.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = ctypes.c_int
    lib.softmax_last_error.restype = ctypes.c_char_p
    return lib
