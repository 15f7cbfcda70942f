# SPDX-License-Identifier: Apache-2.0
"""The ctypes declarations against the header (via the C probe) and the library."""
import ctypes
import os
import unittest

import softmax
from softmax import _library


class Abi(unittest.TestCase):
    def test_default_options_struct_size_matches_ctypes(self):
        o = _library.lib.softmax_default_options()
        self.assertEqual(o.struct_size, ctypes.sizeof(_library.Options))
        self.assertEqual((o.backend, o.flags, o.stream, o.num_threads, o.y_dtype),
                         (0, 0, None, 0, 0))

    @unittest.skipUnless(os.environ.get("SOFTMAX_C_LAYOUT"),
                         "SOFTMAX_C_LAYOUT not set (ctest sets it from bindings/abi_layout_probe.c)")
    def test_options_layout_matches_the_c_compiler(self):
        c = dict(kv.split("=") for kv in os.environ["SOFTMAX_C_LAYOUT"].split())
        O = _library.Options
        self.assertEqual(ctypes.sizeof(O), int(c["sizeof"]))
        self.assertEqual(ctypes.alignment(O), int(c["alignof"]))
        for name, _ in O._fields_:
            self.assertEqual(getattr(O, name).offset, int(c[name]), name)
        self.assertEqual(ctypes.sizeof(ctypes.c_int), int(c["sizeof_enum"]))
        self.assertIn("y_dtype", [name for name, _ in O._fields_])

    def test_flag_and_dtype_values_reach_the_library_with_their_meaning(self):
        # y_dtype is read only with SOFTMAX_FLAG_Y_DTYPE: an invalid one is named in the error
        # only when the flag is set, so both the field's offset and the flag's bit are right.
        from softmax import _calls
        x = (ctypes.c_float * 4)(1, 2, 3, 4)
        y = (ctypes.c_float * 4)()
        o = _library.lib.softmax_default_options()
        o.y_dtype = 99
        self.assertEqual(_library.lib.softmax_rows(x, y, 1, 4, 0, ctypes.byref(o)), 0)
        o.flags = _calls.FLAG_Y_DTYPE
        self.assertEqual(_library.lib.softmax_rows(x, y, 1, 4, 0, ctypes.byref(o)), 4)
        self.assertIn("options->y_dtype is 99", _library.lib.softmax_last_error().decode())
        self.assertEqual(_library.lib.softmax_rows(x, y, 1, 4, 4, None), 4)
        self.assertIn("dtype is 4, not one of SOFTMAX_DTYPE_F32/F16/BF16/F64",
                      _library.lib.softmax_last_error().decode())

    def test_status_names(self):
        from softmax._errors import status_name
        self.assertEqual(status_name(7), "SOFTMAX_STATUS_INVALID_PROBABILITY")
        self.assertEqual(status_name(999), "SOFTMAX_STATUS_UNKNOWN")

    def test_library_version_is_the_abi_this_package_speaks(self):
        self.assertEqual(int(softmax.version().split(".")[0]), _library.ABI_MAJOR)


if __name__ == "__main__":
    unittest.main()
