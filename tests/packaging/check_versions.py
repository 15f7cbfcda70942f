#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when a version number in the source tree differs from the top-level VERSION file.

    python3 tests/packaging/check_versions.py [SOURCE_ROOT]

VERSION is the one place the version is written. This script finds every copy of it:
- the C header's SOFTMAX_VERSION_MAJOR/MINOR/PATCH (include/softmax/softmax.h);
- every Cargo.toml's [package] version and the version required of a path dependency, and the
  Cargo.lock entries of the crates that live in this tree (cargo --locked refuses stale ones);
- every pyproject.toml: a static [project] version, or the one scikit-build-core's regex
  provider reads (from VERSION, or from the header);
- every Julia Project.toml, and a Python package's __version__ if one is declared.
It prints each version it checked, and every mismatch, then exits 1 if there was one.
"""
import os
import pathlib
import re
import sys
import tomllib

# scikit-build-core's default for its regex version provider.
SKBUILD_DEFAULT_REGEX = r"""(?i)^(__version__|VERSION)(?: ?\: ?str)? *= *(['\"])v?(?P<value>.+?)\2"""
SKIP_DIRS = {".git", "target", "__pycache__", "node_modules", ".venv"}


def manifests(root, name):
    """Files called `name` under root, outside SKIP_DIRS and build* folders. Those folders are
    never entered: a build tree inside the source tree can have folders appear and vanish while
    this runs (CMake's try-compile scratch, from tests running beside this one)."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if d not in SKIP_DIRS and not d.startswith("build")]
        if name in files:
            found.append(pathlib.Path(folder) / name)
    yield from sorted(found)


class Checker:
    def __init__(self, root):
        self.root = root
        self.want = (root / "VERSION").read_text().strip()
        if not re.fullmatch(r"\d+\.\d+\.\d+", self.want):
            sys.exit("VERSION must hold MAJOR.MINOR.PATCH, got %r" % self.want)
        self.checked = 0
        self.wrong = []

    def expect(self, path, what, got):
        self.checked += 1
        where = "%s: %s" % (path.relative_to(self.root), what)
        print("  %-70s %s" % (where, got))
        if got != self.want:
            self.wrong.append("%s is %r, VERSION says %r" % (where, got, self.want))

    def c_header(self):
        path = self.root / "include" / "softmax" / "softmax.h"
        text = path.read_text()
        parts = []
        for part in ("MAJOR", "MINOR", "PATCH"):
            m = re.search(r"#define\s+SOFTMAX_VERSION_%s\s+(\d+)" % part, text)
            parts.append(m.group(1) if m else "?")
        self.expect(path, "SOFTMAX_VERSION_MAJOR.MINOR.PATCH", ".".join(parts))

    def cargo(self):
        local_crates = set()
        for path in manifests(self.root, "Cargo.toml"):
            data = tomllib.loads(path.read_text())
            package = data.get("package")
            if package is None:  # a workspace root
                continue
            local_crates.add(package["name"])
            self.expect(path, "[package] version", package.get("version", "(none)"))
            for section in ("dependencies", "build-dependencies", "dev-dependencies"):
                for dep, spec in data.get(section, {}).items():
                    if isinstance(spec, dict) and "path" in spec and "version" in spec:
                        self.expect(path, "%s requires %s" % (section, dep), spec["version"])
        for path in manifests(self.root, "Cargo.lock"):
            for package in tomllib.loads(path.read_text()).get("package", []):
                if package["name"] in local_crates and "source" not in package:
                    self.expect(path, "locked %s" % package["name"], package["version"])

    def pyproject(self):
        for path in manifests(self.root, "pyproject.toml"):
            data = tomllib.loads(path.read_text())
            project = data.get("project", {})
            if "version" in project:
                self.expect(path, "[project] version", project["version"])
                continue
            if "version" not in project.get("dynamic", []):
                continue
            provider = data.get("tool", {}).get("scikit-build", {}).get("metadata", {}).get("version", {})
            if provider.get("provider") != "scikit_build_core.metadata.regex" or "input" not in provider:
                self.expect(path, "dynamic version from an unknown provider", repr(provider))
                continue
            # Do what scikit-build-core's regex provider does: match, then format `result`.
            source = path.parent / provider["input"]
            m = re.search(provider.get("regex", SKBUILD_DEFAULT_REGEX), source.read_text(), re.M)
            got = (provider.get("result", "{value}").format(**m.groupdict()) if m
                   else "(regex does not match %s)" % provider["input"])
            self.expect(path, "dynamic version read from %s" % provider["input"], got)

    def julia(self):
        for path in manifests(self.root, "Project.toml"):
            data = tomllib.loads(path.read_text())
            if "version" in data:
                self.expect(path, "version", data["version"])

    def python_dunder(self):
        for path in manifests(self.root, "__init__.py"):
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", path.read_text(), re.M)
            if m:
                self.expect(path, "__version__", m.group(1))


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parents[2]).resolve()
    c = Checker(root)
    print("VERSION = %s; copies found:" % c.want)
    c.c_header()
    c.cargo()
    c.pyproject()
    c.julia()
    c.python_dunder()
    if c.wrong:
        print("\n%d of %d version(s) differ from VERSION:" % (len(c.wrong), c.checked))
        for w in c.wrong:
            print("  " + w)
        return 1
    print("all %d agree with VERSION" % c.checked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
