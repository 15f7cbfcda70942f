#!/usr/bin/env bash
# The CUDA strategies timed against each other on the shapes where the launcher's table has a
# choice to make (medium and long rows, fp32 and bf16). Each configuration runs softmax_bench
# in its own process, since SOFTMAX_CUDA_STRATEGY and SOFTMAX_CUDA_PREFETCH_THREADS are read once
# per process; the JSON rows of all of them are merged into one file, and a table with one
# column per configuration is printed. This is how the launcher's crossovers were chosen.
#
#   BENCH=build/bench/softmax_bench OUTDIR=out bash bench/strategy_sweep.sh
# Optional: F32_SHAPES, BF16_SHAPES (RxC lists), CONFIGS (names below), REPS, DEADLINE_S.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BENCH=${BENCH:-build/bench/softmax_bench}
OUTDIR=${OUTDIR:-sweep-out}
REPS=${REPS:-10}
F32_SHAPES=${F32_SHAPES:-131072x2048,65536x4096,32768x8192,16384x16384,8192x32768,4096x65536}
BF16_SHAPES=${BF16_SHAPES:-262144x1024,131072x2048,65536x4096,32768x8192,16384x16384,4096x65536}
# name=strategy:max_threads:stages ("auto" = the launcher's own table; stages 0 = cp.async ring,
# N = bulk-copy ring N deep; empty = the table's choice)
CONFIGS=${CONFIGS:-"auto=:: cp512=prefetch:512:0 cp256=prefetch:256:0 bulk3=prefetch:512:3 bulk3t256=prefetch:256:3 cluster=cluster::"}
mkdir -p "$OUTDIR"
end=$(($(date +%s) + ${DEADLINE_S:-300}))

for entry in $CONFIGS; do
  name=${entry%%=*}
  spec=${entry#*=}
  IFS=: read -r strategy threads stages <<< "$spec"
  for pair in "f32 $F32_SHAPES" "bf16 $BF16_SHAPES"; do
    set -- $pair
    left=$((end - $(date +%s)))
    if [ "$left" -lt 10 ]; then echo "strategy_sweep: deadline reached before $name $1"; break 2; fi
    echo "### $name $1"
    SOFTMAX_CUDA_STRATEGY=$strategy SOFTMAX_CUDA_PREFETCH_THREADS=$threads SOFTMAX_CUDA_PREFETCH_STAGES=$stages \
      timeout "$left" "$BENCH" --device cuda --gpu-parts rows --lib-only --reps "$REPS" \
      --dtype "$1" --shapes "$2" --json "$OUTDIR/sweep_${name}_$1.json" > "$OUTDIR/sweep_${name}_$1.log" 2>&1
    echo "rc=$?"
    grep -E "FAIL|error" "$OUTDIR/sweep_${name}_$1.log" | head -5
  done
done

python3 - "$OUTDIR" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rows, table, names = [], {}, []
for path in sorted(glob.glob(os.path.join(out, "sweep_*_*.json"))):
    name = os.path.basename(path)[len("sweep_"):-len(".json")].rsplit("_", 1)[0]
    if name not in names:
        names.append(name)
    doc = json.load(open(path))
    for r in doc.get("rows", []):
        r["config"] = name
        rows.append(r)
        if r.get("variant") in ("libsoftmax", "libsoftmax_dropout_p0.1"):
            key = (r.get("dtype"), r.get("rows"), r.get("cols"), r["variant"])
            table.setdefault(key, {})[name] = "%.0f%s" % (r.get("gbs") or 0, "" if r.get("check") == "pass" else "!")
json.dump({"rows": rows}, open(os.path.join(out, "sweep.json"), "w"), indent=1)
print("GB/s (x + y bytes), median; '!' = failed its float64 check")
print("%-6s %-16s %-9s " % ("dtype", "shape", "op") + " ".join("%12s" % n for n in names))
for (dtype, r, c, impl), cols in sorted(table.items(), key=lambda kv: (kv[0][0], kv[0][3], kv[0][2])):
    op = "dropout" if "dropout" in impl else "softmax"
    print("%-6s %-16s %-9s " % (dtype, "%dx%d" % (r, c), op) + " ".join("%12s" % cols.get(n, "-") for n in names))
PY
