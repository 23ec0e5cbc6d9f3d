#!/usr/bin/env bash
# gdsbench's cuFile path against fio's libcufile engine (and KvikIO) on a GPU
# node, and what -P (worker processes) changes:
#
#   bench/gpu_procs.sh [DATA_DIR]
#
# 1. build, data directory and its udev record, as bench/gpu_validate.sh (gpu_lib.sh);
# 2. -P on the real stack: -x 0 / -x 6 writes and reads with -V, 4 processes;
# 3. 8 x 1 GiB files; 1 MiB sequential reads, 8 workers, in GDSV_ROUNDS rounds
#    whose order rotates each round:
#      gdsbench -x 0 -P 1 (8 threads, one process)
#      gdsbench -x 0 -P 8 (8 processes, one thread each)
#      gdsbench -x 6 -B 4 (8 threads)
#      fio --ioengine=libcufile, 8 jobs = 8 processes (its default)
#    then once each: -x 6 -P 8, -x 0 with parallel_io=false, fio --thread;
# 4. 4 KiB random reads, 32 workers over one 1 GiB file: -x 0, -x 0 -P 8, fio --thread;
# 5. KvikIO's single_node_io (cufile-mfma, 8 threads, 8 GiB) when its wheels are in .whl/;
# 6. one table of every run (also $OUT/table.txt) and a summary per variant
#    ($OUT/summary.txt); JSON records in $OUT/records.jsonl.
#
# Exit status: 0 when every gdsbench run passed; 1 otherwise, each failed run
# named at the end.
#
# Environment: OUT (default bench/obj/gpu_procs), GDSV_T (seconds per run, 5),
# GDSV_ROUNDS (4), GDSV_PROCS (8), GDSV_GPU (0), GDSV_KVIKIO=0 (skip), CUDA_HOME.
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$HERE/obj/gpu_procs}
T=${GDSV_T:-5}
BIG=${GDSV_BIG_SIZE:-1G}
GPU=${GDSV_GPU:-0}
NP=${GDSV_PROCS:-8}
ROUNDS=${GDSV_ROUNDS:-4}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# shellcheck source-path=SCRIPTDIR source=gpu_lib.sh
. "$HERE/gpu_lib.sh"
gdsv_init
T0=$(date +%s)
gdsv_setup "${1:-}"
gdsv_find_fio

say "-P on the real stack: write then read with -V, 4 processes x 1 thread x 64 MiB"
mkdir -p "$DATA/small"
rm -f "$DATA"/small/gdsbench.*
gds "pverify-x0-write" -D "$DATA/small" -d "$GPU" -w 4 -s 64M -i 1M -x 0 -I 1 -V -P 4
gds "pverify-x0-read" -D "$DATA/small" -d "$GPU" -w 4 -i 1M -x 0 -I 0 -V -P 4
gds "pverify-x6-read" -D "$DATA/small" -d "$GPU" -w 4 -i 1M -x 6 -I 0 -V -P 4
gds "pverify-x0-randread" -D "$DATA/small" -d "$GPU" -w 4 -i 4K -x 0 -I 2 -V -T 1 -P 4
rm -rf "$DATA/small"

say "data set: 8 x $BIG files (sequential O_DIRECT write, 8 threads)"
mkdir -p "$DATA/big"
gds "create-8x$BIG" -D "$DATA/big" -w 8 -s "$BIG" -i 1M -x 1 -I 1
sync

F0=$DATA/big/gdsbench.0
SEQ=(-D "$DATA/big" -d "$GPU" -w 8 -i 1M -I 0 -T "$T")
CUFILE=(--ioengine=libcufile --cuda_io=cufile --gpu_dev_ids="$GPU")
variant() {	# variant INDEX ROUND
	case $1 in
	0) gds "seq-x0-r$2" "${SEQ[@]}" -x 0 -P 1 ;;
	1) gds "seq-x0-P$NP-r$2" "${SEQ[@]}" -x 0 -P "$NP" ;;
	2) gds "seq-x6-r$2" "${SEQ[@]}" -x 6 -B 4 ;;
	3) fio_seq "seq-fio-cufile-r$2" "${CUFILE[@]}" ;;
	esac
}

say "sequential 1 MiB reads, 8 workers, ${T}s each, $ROUNDS rounds (order rotates)"
for round in $(seq 1 "$ROUNDS"); do
	for k in 0 1 2 3; do variant $(( (k + round - 1) % 4 )) "$round"; done
done
gds "seq-x6-P$NP" "${SEQ[@]}" -x 6 -B 4 -P "$NP"
gds "seq-x0-nopario" "${SEQ[@]}" -x 0 -P 1 --cufile-param parallel_io=false
fio_seq "seq-fio-cufile-thread" "${CUFILE[@]}" --thread

say "random 4 KiB reads, 32 workers over $F0 ($BIG), ${T}s each"
gds "rand-x0" -f "$F0" -d "$GPU" -w 32 -i 4K -x 0 -I 2 -T "$T"
gds "rand-x0-P$NP" -f "$F0" -d "$GPU" -w 32 -i 4K -x 0 -I 2 -T "$T" -P "$NP"
fio_rand "rand-fio-cufile-thread" "${CUFILE[@]}" --thread

[ "${GDSV_KVIKIO:-1}" = 1 ] && gdsv_kvikio cufile-mfma 8GiB 120

gdsv_table
say "summary per variant (GiB/s for seq, IOPS for rand; runs in time order)"
python3 - "$ROWS" <<'EOF' | tee "$OUT/summary.txt"
import re, statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split("\t")
    if len(f) < 4 or f[2] == "-":
        continue
    m = re.match(r"(.*?)(?:-r(\d+))?$", f[0])
    var, rnd = m.group(1), m.group(2)
    val = float(f[3]) if var.startswith("rand") else float(f[2])
    runs.setdefault(var, []).append((rnd, val, f[1]))
print(f"{'variant':24} {'tool':22} {'n':>2} {'mean':>9} {'median':>9} {'min':>9} {'max':>9}  runs")
for var, rs in runs.items():
    if var.startswith(("create", "pverify")):
        continue
    v = [x[1] for x in rs]
    print(f"{var:24} {rs[0][2]:22} {len(v):2d} {st.mean(v):9.3f} {st.median(v):9.3f} {min(v):9.3f} {max(v):9.3f}  "
          + " ".join(f"{x:.3f}" if x < 100 else f"{x:.0f}" for x in v))
fio = {r: v for r, v, _ in runs.get("seq-fio-cufile", [])}
for var in [k for k in runs if k.startswith("seq-x") and any(r for r, _, _ in runs[k])]:
    ratios = [v / fio[r] for r, v, _ in runs[var] if r in fio and fio[r] > 0]
    if ratios:
        print(f"{var} / fio libcufile, same round: " + " ".join(f"{x:.2f}" for x in ratios)
              + f"  (mean {st.mean(ratios):.2f})")
EOF
echo "elapsed: $(( $(date +%s) - T0 )) s"
rm -rf "$JSONDIR" "$DATA/big"
gdsv_verdict gpu_procs
