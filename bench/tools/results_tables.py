#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Turns softmax_bench JSON (and torch_compare.py JSON) into the Markdown tables of RESULTS.md.

    python3 bench/tools/results_tables.py out/bench_gpu.json [out/torch_compare.json] [cpu.json ...]

Accepts the plain JSON of `softmax_bench --json` and the merged file of bench/device_run.sh
({"parts": [...]}); a torch_compare.py JSON is recognised by its "torch" key.
"""
import json
import sys


def load_rows(paths):
    rows, torch_rows, metas = [], [], []
    for p in paths:
        d = json.load(open(p))
        if "torch" in d:
            torch_rows += d["rows"]
            metas.append("torch %s on %s" % (d["torch"], d["device"]))
            continue
        for part in d.get("parts", [d]):
            rows += part["rows"]
            metas.append("softmax_bench %s, seed %s, %s" % (part["meta"]["library_version"], part["meta"]["seed"],
                                                            part["meta"]["date"]))
    return rows, torch_rows, metas


def pick(table, **kw):
    for r in table:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def g(r, key="gbs", fmt="%.0f"):
    if r is None or r.get(key) is None:
        return "–"
    return fmt % r[key]


def shapes(table, **kw):
    seen = []
    for r in table:
        if all(r.get(k) == v for k, v in kw.items()) and (r["dtype"], r["rows"], r["cols"]) not in seen:
            seen.append((r["dtype"], r["rows"], r["cols"]))
    return seen


def cpu_table(rows):
    out = ["| rows x cols | copy GB/s | libsoftmax GB/s | %copy | oneDNN GB/s | lib/oneDNN | textbook GB/s | lib max_err | oneDNN max_err | dropout p=0.1 GB/s |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for dt, r, c in shapes(rows, device="cpu", section="rows"):
        k = dict(device="cpu", dtype=dt, rows=r, cols=c)
        lib, one = pick(rows, variant="libsoftmax", **k), pick(rows, variant="onednn", **k)
        ratio = "%.2fx" % (lib["gbs"] / one["gbs"]) if lib and one and lib.get("gbs") and one.get("gbs") else "–"
        out.append("| %d x %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r, c, g(pick(rows, variant="copy", **k), fmt="%.1f"), g(lib, fmt="%.1f"), g(lib, "pct_copy", "%.0f%%"),
            g(one, fmt="%.1f"), ratio, g(pick(rows, variant="textbook_3pass", **k), fmt="%.1f"),
            g(lib, "max_rel_err", "%.1e"), g(one, "max_rel_err", "%.1e"),
            g(pick(rows, variant="libsoftmax_dropout_p0.1", **k), fmt="%.1f")))
    return out


def gpu_table(rows):
    out = ["| dtype | rows x cols | copy GB/s | libsoftmax GB/s | %copy | log GB/s | CUB GB/s | Thrust GB/s | best anchor (impl) | lib/anchor |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for dt, r, c in shapes(rows, device="cuda", section="rows"):
        k = dict(device="cuda", section="rows", dtype=dt, rows=r, cols=c)
        lib = pick(rows, variant="libsoftmax", **k)
        anchor = "%s (%s)" % (g(lib, "anchor_gbs"), lib.get("anchor_impl", "")) if lib and lib.get("anchor_gbs") else "–"
        ratio = "%.2fx" % (lib["gbs"] / lib["anchor_gbs"]) if lib and lib.get("gbs") and lib.get("anchor_gbs") else "–"
        out.append("| %s | %d x %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            dt, r, c, g(pick(rows, variant="copy", **k)), g(lib), g(lib, "pct_copy", "%.0f%%"),
            g(pick(rows, variant="libsoftmax_log", **k)), g(pick(rows, variant="cub_block_reduce", **k)),
            g(pick(rows, variant="thrust_reduce_by_key", **k)), anchor, ratio))
    return out


def ladder_table(rows):
    out = ["| rung | ms | GB/s | vs previous |", "|---|---|---|---|"]
    prev = None
    for v in ("01_naive_one_thread", "02_warp_shuffle_reduce", "03_float4_vectorized", "libsoftmax"):
        r = pick(rows, device="cuda", section="ladder", variant=v)
        if r is None:
            continue
        vs = "%.1fx" % (r["gbs"] / prev["gbs"]) if prev and r.get("gbs") and prev.get("gbs") else ""
        out.append("| %s | %s | %s | %s |" % (v, g(r, "ms", "%.4f"), g(r, fmt="%.2f"), vs))
        prev = r
    return out


def dropout_table(rows, torch_rows):
    out = ["| dtype | rows x cols | (a) softmax, then dropout | (b) fused, cuRAND-host uniforms (kernel only / with generation) | (c) library fused | (c)/(a) (seed: 1.8x) | library + mask (GB/s incl. mask) | eager torch | torch.compile |",
           "|---|---|---|---|---|---|---|---|---|"]
    for dt, r, c in shapes(rows, device="cuda", section="dropout_ladder"):
        k = dict(device="cuda", section="dropout_ladder", dtype=dt, rows=r, cols=c)
        a, lib = pick(rows, variant="a_softmax_then_dropout", **k), pick(rows, variant="c_library_fused", **k)
        ratio = "%.2fx" % (lib["gbs"] / a["gbs"]) if a and lib and a.get("gbs") and lib.get("gbs") else "–"
        mask = pick(rows, device="cuda", section="dropout", dtype=dt, rows=r, cols=c, variant="libsoftmax_dropout_p0.1_mask")
        tname = {"f32": "float32", "bf16": "bfloat16"}.get(dt, dt)
        eager = pick(torch_rows, dtype=tname, rows=r, cols=c, variant="torch dropout(softmax) eager")
        comp = pick(torch_rows, dtype=tname, rows=r, cols=c, variant="torch.compile dropout(softmax)")
        out.append("| %s | %d x %d | %s | %s / %s | %s | %s | %s | %s | %s |" % (
            dt, r, c, g(a), g(pick(rows, variant="b_pregen_uniforms_fused_kernel", **k)),
            g(pick(rows, variant="b_curand_generate+fused", **k)), g(lib), ratio, g(mask), g(eager), g(comp)))
    return out


def torch_table(torch_rows):
    out = ["| dtype | rows x cols | torch.softmax | torch.compile | libsoftmax | lib/eager | lib/compile | eager dropout(softmax) | compiled dropout(softmax) | lib dropout | lib/eager | lib/compile |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    seen = []
    for t in torch_rows:
        key = (t["dtype"], t["rows"], t["cols"])
        if key in seen:
            continue
        seen.append(key)
        k = dict(dtype=key[0], rows=key[1], cols=key[2])
        e, cc, lib = (pick(torch_rows, variant=v, **k) for v in ("torch.softmax", "torch.compile softmax", "libsoftmax"))
        de, dc, dl = (pick(torch_rows, variant=v, **k) for v in ("torch dropout(softmax) eager",
                                                                 "torch.compile dropout(softmax)", "libsoftmax dropout"))
        ratio = lambda a, b: "%.2fx" % (a["gbs"] / b["gbs"]) if a and b else "–"
        out.append("| %s | %d x %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            key[0], key[1], key[2], g(e), g(cc), g(lib), ratio(lib, e), ratio(lib, cc), g(de), g(dc), g(dl),
            ratio(dl, de), ratio(dl, dc)))
    return out


def main():
    rows, torch_rows, metas = load_rows(sys.argv[1:])
    print("Sources: " + "; ".join(metas) + "\n")
    for title, table in (("CPU", cpu_table(rows)), ("GPU", gpu_table(rows)), ("Seed ladder", ladder_table(rows)),
                         ("Dropout", dropout_table(rows, torch_rows)), ("PyTorch, same process", torch_table(torch_rows))):
        if len(table) > 2:
            print("### " + title + "\n")
            print("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
