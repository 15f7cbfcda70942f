#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Python package as a user would and runs the Python test suite against the
# installed copy: a fresh virtual environment, `pip install <repository root>` (which builds
# libsoftmax with scikit-build-core and bundles it in the package), then the tests from a
# scratch folder with neither PYTHONPATH nor SOFTMAX_LIBRARY set, after checking that `import
# softmax` found the package and the library inside the environment. Needs PyPI (numpy,
# ml_dtypes, scikit-build-core) and `python -m venv` (Debian: python3-venv).
#
#   bash bindings/python/tests/venv_install.sh        (ctest: bindings.python.install)
#   SOFTMAX_VENV_PYTHON=python3.12 ...                 interpreter for the environment
#   SOFTMAX_WITH_CUDA=ON ...                           build the CUDA backend too (default OFF:
#                                                      the CPU build keeps this test quick)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../../.." && pwd)
python=${SOFTMAX_VENV_PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== $python -m venv $work/venv"
"$python" -m venv "$work/venv"
venv_python=$work/venv/bin/python
# numpy for the tests; ml_dtypes gives numpy a bfloat16, so its tests run here too.
"$venv_python" -m pip install --quiet --disable-pip-version-check numpy ml_dtypes
echo "== pip install $repo (SOFTMAX_WITH_CUDA=${SOFTMAX_WITH_CUDA:-OFF})"
SOFTMAX_WITH_CUDA=${SOFTMAX_WITH_CUDA:-OFF} \
  "$venv_python" -m pip install --quiet --disable-pip-version-check "$repo"

cd "$work"  # no source folder on sys.path: only the installed package can be imported
unset PYTHONPATH SOFTMAX_LIBRARY
"$venv_python" - "$work/venv" <<'PY'
import os, sys
import softmax
from softmax import _library
venv = os.path.realpath(sys.argv[1])
package = os.path.dirname(os.path.realpath(softmax.__file__))
library = os.path.realpath(_library.lib._name)
assert package.startswith(venv + os.sep), "softmax imported from %s, not the venv" % package
assert os.path.dirname(library) == package, "library %s is not the bundled one" % library
print("installed softmax %s at %s with %s" % (softmax.__version__, package,
                                             os.path.basename(library)))
PY
tests=$repo/bindings/python/tests
"$venv_python" -B -m unittest discover -s "$tests" -t "$tests" -v
