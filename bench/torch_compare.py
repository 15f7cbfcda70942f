#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times torch.softmax, torch.compile'd softmax, dropout(softmax(x)) (eager and compiled) and
libsoftmax on the SAME CUDA tensors in one process, checks that they agree, and prints GB/s and
the library's ratios per shape.

    python3 bench/torch_compare.py --lib build/libsoftmax.so [--json out.json] [--shapes f32:2097152x128,...]

libsoftmax is loaded with ctypes through its C ABI (path from --lib or $SOFTMAX_LIBRARY) and runs
on PyTorch's current stream. Times are medians of CUDA-event-timed launches after warm-up;
GB/s = (bytes of x + bytes of y) / time, as in softmax_bench. The default shape list (the 18
shapes of the H200 anchor table, bench/h200_anchor_table.h) took about two minutes on an H200, torch.compile warm-up included; --shapes
picks others.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
LIB_DTYPE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
BACKEND_CUDA = 2
FLAG_LOG = 1
P = 0.1
# The anchor table's shapes: 1 GiB of fp32 per shape (bf16: half of that); dropout at the shapes
# the anchors have dropout numbers for. About two minutes on an H200, torch.compile warm-up included.
DEFAULT_SHAPES = ",".join(
    ["f32:" + s for s in ("8388608x32", "2097152x128", "524288x512", "262144x1024", "131072x2048", "65536x4096",
                          "32768x8192", "16384x16384", "8192x32768", "4096x65536", "256x1048576", "1x268435456")] +
    ["bf16:" + s for s in ("8388608x32", "262144x1024", "65536x4096", "16384x16384", "4096x65536", "1x268435456")])
DROPOUT_SHAPES = {(2097152, 128), (262144, 1024), (65536, 4096), (8192, 32768)}


class SoftmaxOptions(ctypes.Structure):
    # Mirrors softmax_options in include/softmax/softmax.h (C enums are ints).
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("backend", ctypes.c_int),
        ("flags", ctypes.c_uint32),
        ("stream", ctypes.c_void_p),
        ("num_threads", ctypes.c_int32),
    ]


def load_library(path):
    lib = ctypes.CDLL(path)
    lib.softmax_rows.restype = ctypes.c_int
    lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                                 ctypes.POINTER(SoftmaxOptions)]
    lib.softmax_dropout.restype = ctypes.c_int
    lib.softmax_dropout.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                    ctypes.c_int, ctypes.c_float, ctypes.c_uint64, ctypes.c_uint64,
                                    ctypes.POINTER(SoftmaxOptions)]
    lib.softmax_last_error.restype = ctypes.c_char_p
    lib.softmax_status_string.restype = ctypes.c_char_p
    lib.softmax_status_string.argtypes = [ctypes.c_int]
    lib.softmax_version.restype = ctypes.c_char_p
    lib.softmax_backend_available.restype = ctypes.c_int
    lib.softmax_backend_available.argtypes = [ctypes.c_int]
    return lib


class Library:
    def __init__(self, lib):
        self.lib = lib

    def options(self, flags=0):
        return SoftmaxOptions(ctypes.sizeof(SoftmaxOptions), BACKEND_CUDA, flags,
                              ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), 0)

    def check(self, status):
        if status != 0:
            raise RuntimeError("libsoftmax: %s: %s" % (self.lib.softmax_status_string(status).decode(),
                                                      self.lib.softmax_last_error().decode()))

    def softmax(self, x, y, flags=0):
        opt = self.options(flags)
        self.check(self.lib.softmax_rows(x.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1], LIB_DTYPE[x.dtype],
                                         ctypes.byref(opt)))

    def dropout(self, x, y, mask, seed, offset=0):
        opt = self.options()
        self.check(self.lib.softmax_dropout(x.data_ptr(), y.data_ptr(), mask.data_ptr() if mask is not None else None,
                                            x.shape[0], x.shape[1], LIB_DTYPE[x.dtype], P, seed, offset,
                                            ctypes.byref(opt)))


def median_ms(fn, warmup, reps):
    """Median of CUDA-event-timed calls, after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    events[0].record()
    for i in range(reps):
        fn()
        events[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) for i in range(reps))


def max_rel_err(got, ref):
    """max |got - ref| / (|ref| + tiny) over the tensor, in float64."""
    got = got.double()
    return ((got - ref).abs() / (ref.abs() + 1e-30)).max().item()


def sample_rows(x):
    """Rows to check: all of them for few rows, else the first, the last and 30 random ones."""
    if x.shape[0] <= 32:
        return torch.arange(x.shape[0], device=x.device)
    idx = torch.randint(0, x.shape[0], (30,), device=x.device)
    return torch.cat([torch.tensor([0, x.shape[0] - 1], device=x.device), idx])


def parse_shapes(text):
    out = []
    for item in text.split(","):
        dt, shape = item.split(":")
        r, c = shape.split("x")
        out.append((DTYPES[dt], int(r), int(c)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", default=os.environ.get("SOFTMAX_LIBRARY"), help="path of libsoftmax.so")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="dtype:ROWSxCOLS,... (default: the 18 anchor shapes)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    ap.add_argument("--json", help="write all rows to this file")
    args = ap.parse_args()
    if not args.lib:
        sys.exit("torch_compare.py: give --lib PATH or set SOFTMAX_LIBRARY")
    if not torch.cuda.is_available():
        sys.exit("torch_compare.py: no CUDA device")
    torch.cuda.init()
    lib = Library(load_library(args.lib))
    print("torch %s, %s, libsoftmax %s (%s), CUDA backend available: %d" % (
        torch.__version__, torch.cuda.get_device_name(), lib.lib.softmax_version().decode(), args.lib,
        lib.lib.softmax_backend_available(BACKEND_CUDA)), flush=True)
    torch._dynamo.config.cache_size_limit = 64
    torch.manual_seed(int(time.time()))
    rows_out, failures = [], []
    t_start = time.time()

    for dtype, rows, cols in parse_shapes(args.shapes):
        name = "%s %dx%d" % (str(dtype).replace("torch.", ""), rows, cols)
        x = (torch.rand(rows, cols, device="cuda", dtype=torch.float32) * 16 - 8).to(dtype)
        nbytes = 2 * x.numel() * x.element_size()
        res = {}

        def record(variant, ms, extra_bytes=0):
            gbs = (nbytes + extra_bytes) / (ms * 1e-3) / 1e9
            res[variant] = gbs
            rows_out.append({"dtype": str(dtype).replace("torch.", ""), "rows": rows, "cols": cols,
                             "variant": variant, "ms": ms, "gbs": gbs})
            print("  %-34s %9.4f ms %8.0f GB/s" % (variant, ms, gbs), flush=True)

        print("%s (%.2f GiB of x)" % (name, x.numel() * x.element_size() / 2**30), flush=True)
        copy_dst = torch.empty_like(x)
        record("copy (D2D, read+write)", median_ms(lambda: copy_dst.copy_(x), args.warmup, args.reps))
        del copy_dst

        # Agreement first: the library against float64 on sampled rows, and against torch.softmax.
        idx = sample_rows(x)
        ref = torch.softmax(x[idx].double(), dim=-1)
        y_lib = torch.full_like(x, float("nan"))
        try:
            lib.softmax(x, y_lib)
            torch.cuda.synchronize()
            err_lib = max_rel_err(y_lib[idx], ref)
            err_torch = max_rel_err(torch.softmax(x[idx], dim=-1), ref)
            tol = 1e-4 if dtype == torch.float32 else 1e-2
            ok = err_lib <= tol
            print("  agreement: max rel err vs float64: libsoftmax %.2e, torch.softmax %.2e (bound %.0e) %s"
                  % (err_lib, err_torch, tol, "ok" if ok else "FAILED"), flush=True)
            if not ok:
                failures.append("%s libsoftmax max rel err %.2e" % (name, err_lib))
            lib_ok = True
        except RuntimeError as e:
            print("  libsoftmax unavailable: %s" % e, flush=True)
            lib_ok = False
        del ref

        # Eager torch on one row of 2^28 runs on one SM (~0.1 s a call): fewer reps there.
        reps = args.reps if rows > 1 else max(3, args.reps // 6)
        record("torch.softmax", median_ms(lambda: torch.softmax(x, dim=-1), args.warmup, reps))
        if not args.no_compile:
            compiled = torch.compile(lambda t: torch.softmax(t, dim=-1), dynamic=False)
            t0 = time.time()
            compiled(x)
            torch.cuda.synchronize()
            print("  (torch.compile softmax warm-up %.1f s)" % (time.time() - t0), flush=True)
            record("torch.compile softmax", median_ms(lambda: compiled(x), args.warmup, args.reps))
        if lib_ok:
            record("libsoftmax", median_ms(lambda: lib.softmax(x, y_lib), args.warmup, args.reps))
            y_log = torch.empty_like(x)
            record("libsoftmax log", median_ms(lambda: lib.softmax(x, y_log, FLAG_LOG), args.warmup, args.reps))
            del y_log

        if (rows, cols) in DROPOUT_SHAPES:
            record("torch dropout(softmax) eager",
                   median_ms(lambda: F.dropout(torch.softmax(x, dim=-1), p=P, training=True), args.warmup, args.reps))
            if not args.no_compile:
                compiled_d = torch.compile(lambda t: F.dropout(torch.softmax(t, dim=-1), p=P, training=True),
                                           dynamic=False)
                t0 = time.time()
                compiled_d(x)
                torch.cuda.synchronize()
                print("  (torch.compile dropout warm-up %.1f s)" % (time.time() - t0), flush=True)
                record("torch.compile dropout(softmax)", median_ms(lambda: compiled_d(x), args.warmup, args.reps))
            if lib_ok:
                mask = torch.empty(rows, cols, dtype=torch.uint8, device="cuda")
                y_d = torch.full_like(x, float("nan"))
                lib.dropout(x, y_d, mask, seed=1234)
                torch.cuda.synchronize()
                sm = torch.softmax(x[idx].double(), dim=-1)
                want = torch.where(mask[idx].bool(), sm / (1 - P), torch.zeros_like(sm))
                err = ((y_d[idx].double() - want).abs() / (want.abs() + 1e-30)).max().item()
                keep = mask.float().mean().item()
                ok = err <= (1e-4 if dtype == torch.float32 else 1e-2) and abs(keep - (1 - P)) < 0.01
                print("  dropout agreement: y vs softmax*mask/(1-p) max rel err %.2e, keep rate %.4f %s"
                      % (err, keep, "ok" if ok else "FAILED"), flush=True)
                if not ok:
                    failures.append("%s libsoftmax dropout err %.2e keep %.4f" % (name, err, keep))
                record("libsoftmax dropout", median_ms(lambda: lib.dropout(x, y_d, None, 1234), args.warmup, args.reps))
                record("libsoftmax dropout+mask", median_ms(lambda: lib.dropout(x, y_d, mask, 1234), args.warmup,
                                                            args.reps), extra_bytes=mask.numel())
                del mask, y_d

        if "libsoftmax" in res:
            line = "  => libsoftmax/torch.softmax %.2fx" % (res["libsoftmax"] / res["torch.softmax"])
            if "torch.compile softmax" in res:
                line += ", libsoftmax/torch.compile %.2fx" % (res["libsoftmax"] / res["torch.compile softmax"])
            if "libsoftmax dropout" in res:
                line += "; dropout: lib/eager %.2fx" % (res["libsoftmax dropout"] /
                                                                   res["torch dropout(softmax) eager"])
                if "torch.compile dropout(softmax)" in res:
                    line += ", lib/compile %.2fx" % (res["libsoftmax dropout"] /
                                                                res["torch.compile dropout(softmax)"])
            print(line, flush=True)
        del x, y_lib
        torch.cuda.empty_cache()

    print("torch_compare.py finished in %.0f s" % (time.time() - t_start))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": rows_out,
                       "failures": failures}, f, indent=1)
    if failures:
        print("!!!! FAILED agreement checks:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
