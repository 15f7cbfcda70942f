#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times two or more builds of libsoftmax's CPU backend against each other in one process, on the
same buffers, calls alternated, and checks first that they give the same bits. A tuning tool for
shared machines whose memory speed moves from one minute to the next (by 2x on the VMs this
project was measured on): a round times each library in turn, so only differences that hold in
every round count.

    python3 bench/tools/cpu_ab.py --libs old/libsoftmax.so.0,new/libsoftmax.so.0 \\
        --cases rows:65536x1024,dropout3:65536x1024,bwd:2097152x32,dbwd:2097152x32 [--threads 2]

A case is op:ROWSxCOLS, or op:ROWSxCOLS+K with every array K floats past a 64-byte boundary; op one of rows, log, dropout (p = 0.1 at offset 0), dropout1, dropout3
(offsets 1 and 3), bwd, lbwd (log-softmax backward), bwdi and lbwdi (the same in place, dx = dy),
dbwd, dbwd3 (dropout backward at offsets 0 and 3); f32 throughout. Give each library as its own file (copies of libsoftmax.so.0 in separate
folders load side by side). Prints, per case, round and library, the least time of --reps calls
and that time per element. Small cases with --threads 1 and many --reps time the kernels in
cache, apart from the memory.
"""
import argparse
import ctypes
import random
import struct
import sys
import time

from softmax_ctypes import Options, load

P, SEED = 0.1, 0x5EED
IN_PLACE = ("bwdi", "lbwdi")  # backward cases with dx = dy


class Floats:
    """n floats, 64-byte aligned (kept alive with their buffer)."""

    def __init__(self, n, shift=0):
        self.n = n
        self.buf = ctypes.create_string_buffer(4 * (n + shift) + 64)
        self.ptr = ((ctypes.addressof(self.buf) + 63) & ~63) + 4 * shift

    def fill_uniform(self, rng, lo, hi):
        # 64K random floats, then the block doubled until the array is full (fast in pure Python).
        block = min(self.n, 1 << 16)
        ctypes.memmove(self.ptr, struct.pack(f"{block}f", *(rng.uniform(lo, hi) for _ in range(block))), 4 * block)
        done = block
        while done < self.n:
            step = min(done, self.n - done)
            ctypes.memmove(self.ptr + 4 * done, self.ptr, 4 * step)
            done += step

    def fill_nan(self):
        ctypes.memset(self.ptr, 0xFF, 4 * self.n)

    def bytes(self):
        return ctypes.string_at(self.ptr, 4 * self.n)


def call_of(lib, op, rows, cols, a, b, out, threads):
    """The case's call on arrays a (x, or y for the backward), b (dy) and out."""
    o = Options(ctypes.sizeof(Options), 1, 1 if op in ("log", "lbwd", "lbwdi") else 0, None, threads, 0)
    pa, pb, po = a.ptr, b.ptr, out.ptr
    offset = {"dropout1": 1, "dropout3": 3, "dbwd3": 3}.get(op, 0)
    if op in ("rows", "log"):
        return lambda: lib.softmax_rows(pa, po, rows, cols, 0, ctypes.byref(o))
    if op.startswith("dropout"):
        return lambda: lib.softmax_dropout(pa, po, None, rows, cols, 0, P, SEED, offset, ctypes.byref(o))
    if op in ("bwd", "lbwd"):
        return lambda: lib.softmax_rows_backward(pa, pb, po, rows, cols, 0, ctypes.byref(o))
    if op in IN_PLACE:  # in place: out holds dy (a copy of b) and receives dx
        return lambda: lib.softmax_rows_backward(pa, po, po, rows, cols, 0, ctypes.byref(o))
    if op.startswith("dbwd"):
        return lambda: lib.softmax_dropout_backward(pa, pb, po, rows, cols, 0, P, SEED, offset, ctypes.byref(o))
    sys.exit(f"cpu_ab: unknown op {op}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--libs", required=True, help="comma-separated library files")
    ap.add_argument("--cases", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    libs = [load(path) for path in args.libs.split(",")]
    rng = random.Random(1)
    for case in args.cases.split(","):
        op, shape = case.split(":")
        shape, _, shift = shape.partition("+")
        shift = int(shift or 0)
        rows, cols = (int(v) for v in shape.split("x"))
        n = rows * cols
        a, b = Floats(n, shift), Floats(n, shift)
        a.fill_uniform(rng, -8, 8)
        b.fill_uniform(rng, -8, 8)
        if op in ("bwd", "lbwd") + IN_PLACE:  # the backward takes the forward's output
            libs[0].softmax_rows(a.ptr, a.ptr, rows, cols, 0,
                                 ctypes.byref(Options(ctypes.sizeof(Options), 1, 1 if op.startswith("l") else 0, None,
                                                      args.threads, 0)))
        outs = [Floats(n, shift) for _ in libs]
        calls = [call_of(lib, op, rows, cols, a, b, out, args.threads) for lib, out in zip(libs, outs)]
        for i, (call, lib, out) in enumerate(zip(calls, libs, outs)):
            if op in IN_PLACE:
                ctypes.memmove(out.ptr, b.ptr, 4 * n)
            else:
                out.fill_nan()
            if call() != 0:
                sys.exit(f"cpu_ab: {case} failed in library {i}: {lib.softmax_last_error().decode()}")
        first = outs[0].bytes()
        same = all(out.bytes() == first for out in outs[1:])
        print(f"{case}: {'same bits in every library' if same else 'RESULTS DIFFER between the libraries'}")
        for r in range(args.rounds):
            for i, call in enumerate(calls):
                best = float("inf")
                for _ in range(args.reps):
                    t0 = time.perf_counter()
                    call()
                    best = min(best, time.perf_counter() - t0)
                print(f"  round {r} lib {i}: {best * 1e3:.3f} ms ({best * 1e9 / n:.3f} ns per element)")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
