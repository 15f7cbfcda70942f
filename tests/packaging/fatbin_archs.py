#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Lists the GPU architectures compiled into a shared library's CUDA fat binaries.

    python3 tests/packaging/fatbin_archs.py libsoftmax.so.0
    -> "sass: 80 90 100 120" and "ptx: 120" on two lines

Reads the .nv_fatbin section directly (cuobjdump is not part of every CUDA install): a sequence
of fat binaries, each a 16-byte header (magic 0xBA55ED50, version, header size, payload size)
followed by entries whose header gives the kind (1 = PTX, 2 = machine code) at offset 0, the
entry header and payload sizes at 4 and 8, and the SM version at 28. Exits 1 when the library
has no CUDA code at all.
"""
import struct
import subprocess
import sys

MAGIC = 0xBA55ED50


def fatbin_section(path):
    out = subprocess.run(["readelf", "-SW", path], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if ".nv_fatbin" in line:
            fields = line.split("]", 1)[1].split()  # name type address offset size ...
            offset, size = int(fields[3], 16), int(fields[4], 16)
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read(size)
    return b""


def archs(data):
    kinds = {1: set(), 2: set()}
    pos = 0
    while pos + 16 <= len(data):
        magic, _version, header, size = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:
            pos += 8  # fat binaries are 8-byte aligned in the section
            continue
        entry, end = pos + header, pos + header + size
        while entry + 32 <= end:
            kind, _, entry_header, entry_size = struct.unpack_from("<HHIQ", data, entry)
            (sm,) = struct.unpack_from("<I", data, entry + 28)
            if kind in kinds:
                kinds[kind].add(sm)
            entry += entry_header + entry_size
        pos = end
    return kinds


def main():
    kinds = archs(fatbin_section(sys.argv[1]))
    print("sass:", " ".join(str(a) for a in sorted(kinds[2])))
    print("ptx:", " ".join(str(a) for a in sorted(kinds[1])))
    return 0 if kinds[1] or kinds[2] else 1


if __name__ == "__main__":
    sys.exit(main())
