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
        self.assertEqual((o.backend, o.flags, o.stream, o.num_threads), (0, 0, None, 0))

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

    def test_status_names(self):
        from softmax._errors import status_name
        self.assertEqual(status_name(7), "SOFTMAX_STATUS_INVALID_PROBABILITY")
        self.assertEqual(status_name(999), "SOFTMAX_STATUS_UNKNOWN")

    def test_library_version_is_the_abi_this_package_speaks(self):
        self.assertEqual(int(softmax.version().split(".")[0]), _library.ABI_MAJOR)


if __name__ == "__main__":
    unittest.main()
