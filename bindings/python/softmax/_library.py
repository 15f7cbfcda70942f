# SPDX-License-Identifier: Apache-2.0
"""Finds and loads libsoftmax.so and declares its C functions for ctypes.

Search order: the SOFTMAX_LIBRARY environment variable (a path to the .so; an error if it does
not load), then a libsoftmax.so* next to this package, then the system loader (ld.so.conf,
LD_LIBRARY_PATH) as libsoftmax.so.0 or libsoftmax.so.
"""
import ctypes
import glob
import os

# Version 0 of the ABI: the major version this package was written against.
ABI_MAJOR = 0

STATUS_SUCCESS = 0


class Options(ctypes.Structure):
    """softmax_options from include/softmax/softmax.h."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backend", ctypes.c_int),
        ("flags", ctypes.c_uint32),
        ("stream", ctypes.c_void_p),
        ("num_threads", ctypes.c_int32),
        ("y_dtype", ctypes.c_int),
    ]


def _candidates():
    explicit = os.environ.get("SOFTMAX_LIBRARY")
    if explicit:
        return [explicit], True
    here = os.path.dirname(os.path.abspath(__file__))
    beside = sorted(glob.glob(os.path.join(here, "libsoftmax.so*")))
    return beside + ["libsoftmax.so.0", "libsoftmax.so"], False


def _load():
    names, explicit = _candidates()
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            if explicit:
                raise ImportError(
                    "SOFTMAX_LIBRARY=%r could not be loaded: %s" % (name, e)) from e
            errors.append("%s: %s" % (name, e))
    raise ImportError(
        "libsoftmax.so not found. Set SOFTMAX_LIBRARY to its path, copy it next to "
        "softmax/__init__.py, or install it where the system loader looks. Tried:\n  "
        + "\n  ".join(errors))


def _declare(lib):
    c_status, c_dtype, vp = ctypes.c_int, ctypes.c_int, ctypes.c_void_p
    fp = ctypes.c_void_p  # float* (row statistics): passed as addresses, like the arrays
    size = [ctypes.c_int64, ctypes.c_int64]
    opts = ctypes.POINTER(Options)
    dropout = [ctypes.c_float, ctypes.c_uint64, ctypes.c_uint64]
    signatures = {
        "softmax_rows": [vp, vp] + size + [c_dtype, opts],
        "softmax_dropout": [vp, vp, vp] + size + [c_dtype] + dropout + [opts],
        "softmax_rows_backward": [vp, vp, vp] + size + [c_dtype, opts],
        "softmax_dropout_backward": [vp, vp, vp] + size + [c_dtype] + dropout + [opts],
        "softmax_row_stats": [vp, fp, fp] + size + [c_dtype, opts],
        "softmax_rows_from_stats": [vp, vp, fp, fp] + size + [c_dtype, opts],
        "softmax_backward_row_stats": [vp, vp, fp] + size + [c_dtype, opts],
        "softmax_rows_backward_from_stats": [vp, vp, vp, fp] + size + [c_dtype, opts],
    }
    for name, argtypes in signatures.items():
        try:
            fn = getattr(lib, name)
        except AttributeError as e:
            raise ImportError("%s has no %s: it is older than this package; point SOFTMAX_LIBRARY "
                              "at a current libsoftmax" % (lib._name, name)) from e
        fn.argtypes = argtypes
        fn.restype = c_status
    lib.softmax_default_options.argtypes = []
    lib.softmax_default_options.restype = Options
    lib.softmax_backend_available.argtypes = [ctypes.c_int]
    lib.softmax_backend_available.restype = ctypes.c_int
    lib.softmax_status_string.argtypes = [c_status]
    lib.softmax_status_string.restype = ctypes.c_char_p
    lib.softmax_last_error.argtypes = []
    lib.softmax_last_error.restype = ctypes.c_char_p
    lib.softmax_version.argtypes = []
    lib.softmax_version.restype = ctypes.c_char_p
    return lib


lib = _declare(_load())

_loaded_major = int(lib.softmax_version().decode().split(".")[0])
if _loaded_major != ABI_MAJOR:
    raise ImportError("libsoftmax %s was loaded from %s, but this package speaks ABI version %d"
                      % (lib.softmax_version().decode(), lib._name, ABI_MAJOR))
