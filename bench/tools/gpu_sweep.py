#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Times libsoftmax's CUDA backend on many shapes in one process, next to a same-size copy and
eager torch on the same tensors, and checks every result against float64 first. A tuning tool:
the strategy knobs (SOFTMAX_CUDA_STRATEGY, SOFTMAX_CUDA_MAX_THREADS, SOFTMAX_CUDA_MAX_CLUSTER)
are read once per process, so run it once per setting.

    python3 bench/tools/gpu_sweep.py --lib build/libsoftmax.so --cases rows:f32:1000x4097,bwd:bf16:512x8192+1 \
        [--torch] [--json out.json]

`--latency COLS,...` times single f32 rows and `--graph op:dtype:ROWSxCOLS,...` any call shape
in CUDA graph replay (the host not timed); `--graph-nodes` what a memset or an alloc and free
add to a kernel in graph replay.

A case is op:dtype:ROWSxCOLS[+OFFSET], op one of rows, log, dropout, dropout3 (offset 3), bwd,
dbwd (dropout backward), mixed (bf16 x -> f32 y; also timed: the conversion copy of x into y, the
same bytes read and written), narrow (f32 x -> y of the case's 16-bit dtype, with its conversion
copy), mdropout (dropout of the case's 16-bit x into f32 y), mbwd (backward of y and dy of the
case's 16-bit dtype into f32 dx), stats; +OFFSET shifts x and y (and dy) by that many elements. GB/s
counts every array read and written once. Each sample times one call after the previous one
finished (the host's launch inside the events); --batch N times N calls back to back per sample,
the steady rate softmax_bench measures.
"""
import argparse
import ctypes
import json
import sys

import torch

from softmax_ctypes import Options, load

DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}
CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3}
FLAG_LOG, FLAG_Y_DTYPE = 1, 2


def opts(flags=0, y_dtype=0):
    return Options(ctypes.sizeof(Options), 2, flags, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), 0,
                   y_dtype)


def error_floor(dt):
    """Relative errors use this floor: the output type's smallest normal (f16: its subnormal step)."""
    return {torch.float16: 2.0 ** -24, torch.float64: 2.0 ** -1022}.get(dt, 2.0 ** -126)


def check(lib, status):
    if status != 0:
        raise RuntimeError("libsoftmax status %d: %s" % (status, lib.softmax_last_error().decode()))


def buffers(n, dtype, offset, count):
    """`count` tensors of n elements, each starting `offset` elements into its own allocation."""
    return [torch.empty(n + offset, dtype=dtype, device="cuda")[offset:] for _ in range(count)]


def median_ms(fn, reps, batch=1):
    """Median ms per call over `reps` samples of `batch` calls each: 1 times each call alone after
    an idle GPU (the host's launch inside the events); more time calls queued back to back, as
    softmax_bench does, the steady rate."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / batch)
    times.sort()
    return times[len(times) // 2]


def run_case(lib, spec, reps, with_torch, with_compile=False, batch=1):
    op, dname, shape = spec.split(":")
    offset = 0
    if "+" in shape:
        shape, off = shape.split("+")
        offset = int(off)
    rows, cols = (int(v) for v in shape.split("x"))
    dt = DT[dname]
    n = rows * cols
    x, y = buffers(n, dt, offset, 2)
    x.copy_(torch.randn(n, device="cuda", dtype=torch.float32).to(dt) * 3)
    x2, y2 = x.view(rows, cols), y.view(rows, cols)
    es = x.element_size()
    seed, p = 1234, 0.1
    if op in ("rows", "log"):
        flags = FLAG_LOG if op == "log" else 0
        o = opts(flags)
        call = lambda: lib.softmax_rows(x.data_ptr(), y.data_ptr(), rows, cols, CODE[dt], ctypes.byref(o))
        check(lib, call())
        ref = (torch.log_softmax if op == "log" else torch.softmax)(x2.double(), -1)
        err = ((y2.double() - ref).abs() / ref.abs().clamp_min(error_floor(dt))).max().item() if op != "log" \
            else (y2.double() - ref).abs().max().item()
        moved = 2 * n * es
        eager = (lambda: torch.log_softmax(x2, -1)) if op == "log" else (lambda: torch.softmax(x2, -1))
    elif op == "mixed":
        yf = buffers(n, torch.float32, offset, 1)[0]
        o = opts(FLAG_Y_DTYPE, 0)
        call = lambda: lib.softmax_rows(x.data_ptr(), yf.data_ptr(), rows, cols, CODE[dt], ctypes.byref(o))
        check(lib, call())
        ref = torch.softmax(x2.double(), -1)
        err = ((yf.view(rows, cols).double() - ref).abs() / ref.abs().clamp_min(1e-30)).max().item()
        moved = n * es + n * 4
        eager = lambda: torch.softmax(x2, -1, dtype=torch.float32)
        # The copy that moves the same bytes the same way: x converted into y.
        convert = lambda: yf.view(rows, cols).copy_(x2)
    elif op == "narrow":
        xf = buffers(n, torch.float32, offset, 1)[0]
        xf.copy_(x.float())
        o = opts(FLAG_Y_DTYPE, CODE[dt])
        call = lambda: lib.softmax_rows(xf.data_ptr(), y.data_ptr(), rows, cols, 0, ctypes.byref(o))
        check(lib, call())
        ref = torch.softmax(xf.view(rows, cols).double(), -1)
        err = ((y2.double() - ref).abs() / ref.abs().clamp_min(error_floor(dt))).max().item()
        moved = n * 4 + n * es
        xf2 = xf.view(rows, cols)
        eager = lambda: torch.softmax(xf2, -1).to(dt)
        convert = lambda: y2.copy_(xf2)
    elif op in ("dropout", "dropout3", "mdropout"):  # mdropout: 16-bit x, f32 y
        off = 3 if op == "dropout3" else 8
        mixed_y = op == "mdropout"
        yd = buffers(n, torch.float32, offset, 1)[0] if mixed_y else y
        o = opts(FLAG_Y_DTYPE, 0) if mixed_y else opts()
        call = lambda: lib.softmax_dropout(x.data_ptr(), yd.data_ptr(), None, rows, cols, CODE[dt], p, seed, off,
                                           ctypes.byref(o))
        check(lib, call())
        ref = torch.softmax(x2.double(), -1) / (1 - p)
        yv = yd.view(rows, cols)
        kept = yv != 0
        err = ((yv.double() - ref).abs() / ref.abs().clamp_min(error_floor(yd.dtype)))[kept].max().item()
        moved = n * es + n * yd.element_size()
        if mixed_y:
            eager = lambda: torch.nn.functional.dropout(torch.softmax(x2, -1, dtype=torch.float32), p)
        else:
            eager = lambda: torch.nn.functional.dropout(torch.softmax(x2, -1), p)
    elif op == "mbwd":  # f32 x and dx, y and dy of the 16-bit type
        s, dy = buffers(n, dt, offset, 2)
        dxf = buffers(n, torch.float32, offset, 1)[0]
        s.copy_(torch.softmax(x2.float(), -1).to(dt).view(-1))
        dy.copy_(torch.randn(n, device="cuda").to(dt))
        o = opts(FLAG_Y_DTYPE, CODE[dt])
        call = lambda: lib.softmax_rows_backward(s.data_ptr(), dy.data_ptr(), dxf.data_ptr(), rows, cols, 0,
                                                 ctypes.byref(o))
        check(lib, call())
        sd, dyd = s.view(rows, cols).double(), dy.view(rows, cols).double()
        ref = sd * (dyd - (sd * dyd).sum(-1, keepdim=True))
        err = ((dxf.view(rows, cols).double() - ref).abs().max() / ref.abs().max()).item()
        moved = 2 * n * es + n * 4
        eager = None  # torch's backward takes a 16-bit y and dy only into a 16-bit dx
    elif op == "bwd":
        s, dy, dx = buffers(n, dt, offset, 3)
        s.copy_(torch.softmax(x2.float(), -1).to(dt).view(-1))
        dy.copy_(torch.randn(n, device="cuda").to(dt))
        o = opts()
        call = lambda: lib.softmax_rows_backward(s.data_ptr(), dy.data_ptr(), dx.data_ptr(), rows, cols, CODE[dt],
                                                 ctypes.byref(o))
        check(lib, call())
        sd, dyd = s.view(rows, cols).double(), dy.view(rows, cols).double()
        ref = sd * (dyd - (sd * dyd).sum(-1, keepdim=True))
        err = ((dx.view(rows, cols).double() - ref).abs().max() / ref.abs().max()).item()
        moved = 3 * n * es
        s2, dy2 = s.view(rows, cols), dy.view(rows, cols)
        eager = lambda: torch.ops.aten._softmax_backward_data(dy2, s2, -1, dt)
    elif op == "dbwd":
        dy, dx = buffers(n, dt, offset, 2)
        dy.copy_(torch.randn(n, device="cuda").to(dt))
        o = opts()
        call = lambda: lib.softmax_dropout_backward(x.data_ptr(), dy.data_ptr(), dx.data_ptr(), rows, cols, CODE[dt],
                                                    p, seed, 8, ctypes.byref(o))
        check(lib, call())
        mask = torch.empty(n, dtype=torch.uint8, device="cuda")
        check(lib, lib.softmax_dropout(x.data_ptr(), y.data_ptr(), mask.data_ptr(), rows, cols, CODE[dt], p, seed, 8,
                                       ctypes.byref(o)))
        sd = torch.softmax(x2.double(), -1)
        g = dy.view(rows, cols).double() * mask.view(rows, cols).double() / (1 - p)
        ref = sd * (g - (sd * g).sum(-1, keepdim=True))
        err = ((dx.view(rows, cols).double() - ref).abs().max() / ref.abs().max()).item()
        moved = 3 * n * es
        eager = None
    elif op == "stats":
        mx, se = torch.empty(rows, device="cuda"), torch.empty(rows, device="cuda")
        o = opts()
        call = lambda: lib.softmax_row_stats(x.data_ptr(), mx.data_ptr(), se.data_ptr(), rows, cols, CODE[dt],
                                             ctypes.byref(o))
        check(lib, call())
        xd = x2.double()
        m = xd.max(-1).values
        err = max((mx.double() - m).abs().max().item(),
                  ((se.double() - (xd - m[:, None]).exp().sum(-1)) / se.double()).abs().max().item())
        moved = n * es
        eager = None
    else:
        raise SystemExit("unknown op " + op)
    ms = median_ms(lambda: check(lib, call()), reps, batch)
    src = torch.empty(moved // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = median_ms(lambda: dst.copy_(src), reps, batch)
    copy_gbps = 2 * (moved // 2) / copy_ms / 1e6
    gbps = moved / ms / 1e6
    row = {"case": spec, "ms": ms, "gbps": gbps, "copy_gbps": copy_gbps, "pct_copy": 100 * gbps / copy_gbps,
           "err": err}
    if op in ("mixed", "narrow"):
        row["convert_gbps"] = moved / median_ms(convert, reps, batch) / 1e6
    if with_torch and eager is not None:
        row["torch_gbps"] = moved / median_ms(eager, reps, batch) / 1e6
        if with_compile:
            compiled = torch.compile(eager)
            row["compile_gbps"] = moved / median_ms(compiled, reps, batch) / 1e6
    return row


def latency_us(lib, cols, reps=200):
    """Kernel time of one softmax_rows call on a single f32 row: `reps` calls captured in one
    CUDA graph and replayed, so the host's launch cost is not timed."""
    x = torch.randn(cols, device="cuda")
    y = torch.empty_like(x)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        o = opts()
        check(lib, lib.softmax_rows(x.data_ptr(), y.data_ptr(), 1, cols, 0, ctypes.byref(o)))
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for _ in range(reps):
                lib.softmax_rows(x.data_ptr(), y.data_ptr(), 1, cols, 0, ctypes.byref(o))
    g.replay()
    torch.cuda.synchronize()
    ms = median_ms(g.replay, 10)
    ref = torch.softmax(x.double(), -1)
    err = ((y.double() - ref).abs() / ref).max().item()
    return 1000 * ms / reps, err


def graph_us(lib, spec, reps=20):
    """us per call of one call shape (op:dtype:ROWSxCOLS, op one of rows, dropout, bwd, dbwd, mixed
    and mdropout (16-bit x, f32 y)): `reps` calls captured in one CUDA graph, the median of 9
    replays (the host is not timed)."""
    op, dname, shape = spec.split(":")
    rows, cols = (int(v) for v in shape.split("x"))
    dt = DT[dname]
    n = rows * cols
    mixed_y = op in ("mixed", "mdropout")
    x = torch.randn(n, device="cuda").to(dt)
    y = torch.empty(n, dtype=torch.float32 if mixed_y else dt, device="cuda")
    dy = torch.randn(n, device="cuda").to(dt)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        o = opts(FLAG_Y_DTYPE, 0) if mixed_y else opts()
        xp, yp, c = x.data_ptr(), y.data_ptr(), CODE[dt]
        call = {
            "rows": lambda: lib.softmax_rows(xp, yp, rows, cols, c, ctypes.byref(o)),
            "dropout": lambda: lib.softmax_dropout(xp, yp, None, rows, cols, c, 0.1, 7, 8, ctypes.byref(o)),
            "bwd": lambda: lib.softmax_rows_backward(xp, dy.data_ptr(), yp, rows, cols, c, ctypes.byref(o)),
            "dbwd": lambda: lib.softmax_dropout_backward(xp, dy.data_ptr(), yp, rows, cols, c, 0.1, 7, 8,
                                                         ctypes.byref(o)),
        }[{"mixed": "rows", "mdropout": "dropout"}.get(op, op)]  # the same calls into an f32 y
        check(lib, call())
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for _ in range(reps):
                call()
    g.replay()
    torch.cuda.synchronize()
    us = 1000 * median_ms(g.replay, 9) / reps
    moved = n * (3 * x.element_size() if op in ("bwd", "dbwd") else x.element_size() + y.element_size())
    return us, moved / us / 1e3


def graph_node_costs(reps=200):
    """us per call, in graph replay, of a one-element kernel alone and with the nodes a
    cooperative split call adds around its kernel: a memset (m) and a stream-ordered alloc and
    free (a)."""
    import glob
    rt = ctypes.CDLL(sorted(glob.glob("/usr/local/cuda/lib64/libcudart.so*"))[0])
    y, buf = torch.zeros(1, device="cuda"), torch.zeros(1024, device="cuda")
    stream = torch.cuda.Stream()
    out = {}
    for kind in ("k", "mk", "ak", "amk"):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream), torch.cuda.graph(g, stream=stream):
            h = ctypes.c_void_p(stream.cuda_stream)
            for _ in range(reps):
                p = ctypes.c_void_p(buf.data_ptr())
                if "a" in kind:
                    check_rt(rt.cudaMallocAsync(ctypes.byref(p), ctypes.c_size_t(4096), h))
                if "m" in kind:
                    check_rt(rt.cudaMemsetAsync(p, 0, ctypes.c_size_t(64), h))
                y.add_(1)
                if "a" in kind:
                    check_rt(rt.cudaFreeAsync(p, h))
        g.replay()
        torch.cuda.synchronize()
        out[kind] = 1000 * median_ms(g.replay, 7) / reps
    return out


def check_rt(err):
    if err != 0:
        raise RuntimeError("CUDA runtime error %d" % err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cases", default="")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=1,
                    help="calls per timed sample: 1 times single calls, more the back-to-back rate")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--compile", action="store_true", help="also torch.compile'd torch (with --torch)")
    ap.add_argument("--latency", default="", help="comma-separated single-row lengths to time in a CUDA graph")
    ap.add_argument("--graph", default="", help="comma-separated op:dtype:ROWSxCOLS calls (rows, dropout, bwd, "
                                                "dbwd, mixed, mdropout) timed in a CUDA graph of 20")
    ap.add_argument("--graph-nodes", action="store_true",
                    help="the graph replay cost of a memset and of an alloc and free beside a kernel")
    ap.add_argument("--json")
    a = ap.parse_args()
    lib = load(a.lib)
    out = []
    for cols in [int(c) for c in a.latency.split(",") if c]:
        us, err = latency_us(lib, cols)
        out.append({"latency_cols": cols, "us": us, "err": err})
        print("latency 1x%-10d %8.2f us per call (graph replay)  err %.1e" % (cols, us, err), flush=True)
    if a.graph_nodes:
        costs = graph_node_costs()
        out.append({"graph_nodes_us": costs})
        print("graph nodes, us per call: kernel %.2f, memset + kernel %.2f, alloc + kernel + free %.2f, all %.2f"
              % (costs["k"], costs["mk"], costs["ak"], costs["amk"]), flush=True)
    for spec in [c for c in a.graph.split(",") if c]:
        us, gbps = graph_us(lib, spec)
        out.append({"graph": spec, "us": us, "gbps": gbps})
        print("graph %-24s %8.2f us per call %7.0f GB/s" % (spec, us, gbps), flush=True)
    for spec in [c for c in a.cases.split(",") if c]:
        try:
            r = run_case(lib, spec, a.reps, a.torch, a.compile, a.batch)
        except Exception as e:  # one failing case must not hide the others
            r = {"case": spec, "error": str(e)}
        out.append(r)
        if "error" in r:
            print("%-28s ERROR %s" % (spec, r["error"]), flush=True)
        else:
            print("%-28s %9.3f ms %7.0f GB/s %5.1f%% of copy  err %.1e%s%s%s" % (
                spec, r["ms"], r["gbps"], r["pct_copy"], r["err"],
                "  convert %6.0f" % r["convert_gbps"] if "convert_gbps" in r else "",
                "  torch %6.0f" % r["torch_gbps"] if "torch_gbps" in r else "",
                "  compile %6.0f" % r["compile_gbps"] if "compile_gbps" in r else ""), flush=True)
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
