#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Charts of the benchmark's JSON: effective GB/s against row length.

    python3 bench/tools/plot.py RESULT.json [RESULT.json ...] [--out DIR]

Reads any mix of
  - softmax_bench --json output (bench/run.sh writes bench-cpu.json and bench-cuda.json),
  - the merged file of bench/device_run.sh ({"parts": [...]}),
  - bench/torch_compare.py --json output (torch and torch.compile on the same tensors),
and writes, for what the files contain:
  cpu_softmax.png   CPU: libsoftmax, oneDNN, the textbook loop and a memcpy of the same bytes
  gpu_softmax.png   GPU, one panel per dtype: libsoftmax, torch.softmax, torch.compile, copy
  gpu_dropout.png   GPU softmax+dropout: libsoftmax fused, torch eager and torch.compile
GB/s counts one read of x and one write of y. Where a file has several shapes with the same
number of columns, the one with the most elements is plotted.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

DTYPE = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "float64": "f64"}

# (label, style) of each series; the same look on every chart.
STYLE = {
    "libsoftmax": dict(color="tab:blue", marker="o", linewidth=2.2),
    "libsoftmax dropout": dict(color="tab:blue", marker="o", linewidth=2.2),
    "oneDNN": dict(color="tab:orange", marker="s"),
    "torch.softmax": dict(color="tab:orange", marker="s"),
    "torch dropout(softmax)": dict(color="tab:orange", marker="s"),
    "torch.compile": dict(color="tab:green", marker="^"),
    "torch.compile dropout(softmax)": dict(color="tab:green", marker="^"),
    "textbook loop": dict(color="tab:gray", marker="v", linestyle=":"),
    "copy": dict(color="black", linestyle="--", linewidth=1.2),
}


def load(paths):
    """Rows of softmax_bench (with their meta) and of torch_compare.py, dtype names unified."""
    bench, torch_rows, metas = [], [], []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if "torch" in data:
            for r in data["rows"]:
                torch_rows.append(dict(r, dtype=DTYPE.get(r["dtype"], r["dtype"])))
            metas.append({"torch": data["torch"], "gpu": data.get("device", "")})
            continue
        for part in data.get("parts", [data]):
            bench += part["rows"]
            metas.append(part.get("meta", {}))
    return bench, torch_rows, metas


def series(rows, **match):
    """{cols: gbs} of the rows matching every key, keeping the largest shape per column count."""
    best = {}
    for r in rows:
        if r.get("gbs") is None or any(r.get(k) != v for k, v in match.items()):
            continue
        size = r["rows"] * r["cols"]
        if r["cols"] not in best or size > best[r["cols"]][0]:
            best[r["cols"]] = (size, r["gbs"])
    return {c: g for c, (_, g) in sorted(best.items())}


def draw(ax, lines, title):
    drawn = 0
    for label, points in lines:
        if not points:
            continue
        ax.plot(list(points), list(points.values()), label=label, **STYLE.get(label, {}))
        drawn += 1
    ax.set_xscale("log", base=2)
    ax.set_xlabel("columns per row")
    ax.set_ylabel("GB/s (read x + write y)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(title, fontsize=10)
    if drawn:
        ax.legend(fontsize=8)
    return drawn


def meta_value(metas, key):
    for m in metas:
        if m.get(key):
            return str(m[key])
    return ""


def save(fig, out, name, written):
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


def cpu_chart(bench, metas, out, written):
    dtypes = sorted({r["dtype"] for r in bench if r["device"] == "cpu" and r["section"] == "rows"})
    if not dtypes:
        return
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.4 * len(dtypes), 4.4), squeeze=False)
    for ax, dt in zip(axes[0], dtypes):
        k = dict(device="cpu", section="rows", dtype=dt)
        draw(ax, [("libsoftmax", series(bench, variant="libsoftmax", **k)),
                  ("oneDNN", series(bench, variant="onednn", **k)),
                  ("textbook loop", series(bench, variant="textbook_3pass", **k)),
                  ("copy", series(bench, variant="copy", **k))], dt)
    threads = meta_value(metas, "cpu_threads")
    fig.suptitle("CPU softmax: %s, %s thread(s); libsoftmax %s, %s" % (
        meta_value(metas, "cpu") or "CPU", threads or "?", meta_value(metas, "library_version"),
        meta_value(metas, "date")[:10]), fontsize=10)
    save(fig, out, "cpu_softmax.png", written)


def gpu_charts(bench, torch_rows, metas, out, written):
    gpu = [r for r in bench if r["device"] == "cuda"]
    dtypes = sorted({r["dtype"] for r in gpu if r["section"] == "rows"} | {r["dtype"] for r in torch_rows})
    if not dtypes:
        return
    name = meta_value(metas, "gpu") or "GPU"

    def lib_or_torch_compare(bench_variant, torch_variant, dt, section="rows"):
        s = series(gpu, section=section, variant=bench_variant, dtype=dt)
        return s or series(torch_rows, variant=torch_variant, dtype=dt)

    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.4 * len(dtypes), 4.4), squeeze=False)
    for ax, dt in zip(axes[0], dtypes):
        draw(ax, [("libsoftmax", lib_or_torch_compare("libsoftmax", "libsoftmax", dt)),
                  ("torch.softmax", series(torch_rows, variant="torch.softmax", dtype=dt)),
                  ("torch.compile", series(torch_rows, variant="torch.compile softmax", dtype=dt)),
                  ("copy", lib_or_torch_compare("copy", "copy (D2D, read+write)", dt))], dt)
    fig.suptitle("GPU softmax: %s; libsoftmax %s, %s" % (name, meta_value(metas, "library_version"),
                                                         meta_value(metas, "date")[:10]), fontsize=10)
    save(fig, out, "gpu_softmax.png", written)

    dropout = [
        ("libsoftmax dropout", series(torch_rows, variant="libsoftmax dropout", dtype="f32") or
         series(gpu, section="dropout", variant="libsoftmax_dropout_p0.1", dtype="f32")),
        ("torch dropout(softmax)", series(torch_rows, variant="torch dropout(softmax) eager", dtype="f32")),
        ("torch.compile dropout(softmax)", series(torch_rows, variant="torch.compile dropout(softmax)", dtype="f32")),
    ]
    if any(points for _, points in dropout):
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        draw(ax, dropout, "f32, p = 0.1")
        fig.suptitle("GPU softmax + dropout: %s" % name, fontsize=10)
        save(fig, out, "gpu_dropout.png", written)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+", help="softmax_bench, device_run.sh or torch_compare.py JSON")
    parser.add_argument("--out", default=".", help="folder for the PNG files (default: .)")
    args = parser.parse_args()
    bench, torch_rows, metas = load(args.json)
    os.makedirs(args.out, exist_ok=True)
    written = []
    cpu_chart(bench, metas, args.out, written)
    gpu_charts(bench, torch_rows, metas, args.out, written)
    if not written:
        sys.exit("plot.py: no CPU or GPU rows in %s" % ", ".join(args.json))
    if any(r["device"] == "cuda" for r in bench) and not torch_rows:
        print("plot.py: no torch_compare.py JSON given: the GPU chart has no torch lines")
    for path in written:
        print("plot.py: wrote", path)


if __name__ == "__main__":
    main()
