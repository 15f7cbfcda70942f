# SPDX-License-Identifier: Apache-2.0
"""Runs torch_cases.py; exit 0 if they pass, 1 if any fails, 77 (ctest's SKIP_RETURN_CODE) if
every case was skipped because torch, numpy, a GPU or the CUDA backend is missing."""
import importlib.util
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

if importlib.util.find_spec("numpy") is None:  # the reference needs it; torch does not bring it
    print("torch cases skipped: %s has no numpy" % sys.executable)
    sys.exit(77)

import torch_cases  # noqa: E402

suite = unittest.defaultTestLoader.loadTestsFromModule(torch_cases)
result = unittest.TextTestRunner(verbosity=2).run(suite)
if not result.wasSuccessful():
    sys.exit(1)
if result.testsRun == len(result.skipped):
    print("all torch cases skipped: %s" % (torch_cases.NO_CUDA or torch_cases.NO_TORCH))
    sys.exit(77)
if torch_cases.NO_CUDA:
    print("CUDA cases skipped: %s" % torch_cases.NO_CUDA)
sys.exit(0)
