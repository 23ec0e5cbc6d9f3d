#!/usr/bin/env bash
# The watch of a benchmark job on a GPU node: what it costs and what it sees.
#
#   bash bench/gpu_watch.sh [DATA_DIR]
#
# 1. builds gdsbench, finds a data directory on ext4/xfs and its udev record (gpu_lib.sh);
# 2. 8 x GDSV_BIG_SIZE (1G) files, written once with O_DIRECT (-x 1);
# 3. once, by hand: gds_stats -p PID -l 3 on a running cuFile read, to show what cuFile's
#    statistics say on this machine (they need cufile.json's profile.cufile_stats at 3);
# 4. GDSV_ROUNDS (4) rounds of the same 1 MiB sequential cuFile read (-x 0, 8 workers,
#    GDSV_T s), bare and watched, the order alternating (bench/watch_overhead.py): watched is
#    what gds_bench does around a job (NVML sampling of every GPU, diskstats, gds_stats beside
#    it). Prints GiB/s side by side, the ratio per round and the median overhead, and per
#    watched run the GPU's NVML PCIe receive bytes against the bytes the job read (and which
#    NVML source gave them), the drive load, cuFile's placement, the path's limit, the checks,
#    the CPU time the watch took; the overhead is judged on the ratios' 95 % interval;
# 5. GDSV_CACHED_ROUNDS (6) rounds of GDSV_CACHED_T (3) s of the same read from the page cache
#    (-x 4: buffered pread, then cudaMemcpy to the GPU), where the disk's noise does not hide 1 %.
#
# Exit status: 0 when every run that had to pass passed (the overhead is reported, not judged:
# one GPU and a virtual disk are noisy); 1 otherwise, each failed run named.
# Time: about 30 s of build, 10 s of data, 10 s for step 3, then about 2 x (GDSV_T + 3) s per
# round, then 2 x (GDSV_CACHED_T + 3) s per cached round: under 3 minutes with the defaults.
# Environment: OUT (default bench/obj/gpu_watch), GDSV_T (5), GDSV_ROUNDS (4), GDSV_GPU (0),
# GDSV_BIG_SIZE (1G), GDSV_INTERVAL (NVML sampling interval, 0.5 s as gds_bench), CUDA_HOME.
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$HERE/obj/gpu_watch}
T=${GDSV_T:-5}
BIG=${GDSV_BIG_SIZE:-1G}
GPU=${GDSV_GPU:-0}
ROUNDS=${GDSV_ROUNDS:-4}
CACHED_ROUNDS=${GDSV_CACHED_ROUNDS:-6}
CACHED_T=${GDSV_CACHED_T:-3}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
GDS_STATS=$CUDA_HOME/gds/tools/gds_stats
# shellcheck source-path=SCRIPTDIR source=gpu_lib.sh
. "$HERE/gpu_lib.sh"
gdsv_init
T0=$(date +%s)
gdsv_setup "${1:-}"
PY=python3
if ! "$PY" -c "import pynvml" 2>/dev/null && [ -x "$ROOT/.venv/bin/python" ]; then
	PY=$ROOT/.venv/bin/python	# the one with nvidia-ml-py
fi
echo "python: $PY ($("$PY" -c 'import pynvml; print("pynvml", getattr(pynvml, "__version__", "?"))' 2>&1 | tail -1))"

say "data set: 8 x $BIG files (sequential O_DIRECT write, 8 threads)"
mkdir -p "$DATA/big"
gds "create-8x$BIG" -D "$DATA/big" -w 8 -s "$BIG" -i 1M -x 1 -I 1
sync

say "cuFile's statistics of a running read, by hand (gds_stats -p PID -l 3)"
grep -n '"cufile_stats"' "${CUFILE_ENV_PATH_JSON:-/etc/cufile.json}" 2>/dev/null | head -2 \
	|| echo "no profile.cufile_stats in ${CUFILE_ENV_PATH_JSON:-/etc/cufile.json} (the default is 0)"
if [ -x "$GDS_STATS" ]; then
	CUDA_DEVICE_ORDER=PCI_BUS_ID "$GDS" -D "$DATA/big" -d "$GPU" -w 8 -s "$BIG" -i 1M -x 0 -I 0 -T 6 -P 1 \
		--json "$OUT/gds_stats-run.json" >/dev/null 2>&1 &
	pid=$!
	sleep 4
	"$GDS_STATS" -p "$pid" -l 3 2>&1 | head -40 | sed 's/^/  | /'
	echo "gds_stats exit ${PIPESTATUS[0]} (pid $pid, one process: -P 1)"
	wait "$pid"
else
	echo "$GDS_STATS not found: cuFile's per-GPU placement stays unknown in the watch"
fi

say "the same read, bare and watched: $ROUNDS rounds of ${T}s (-x 0, 8 workers, GPU $GPU)"
"$PY" "$HERE/watch_overhead.py" --gdsbench "$GDS" --dir "$DATA/big" --gpu "$GPU" --xfer 0 --rounds "$ROUNDS" \
	--seconds "$T" --size "$BIG" --interval "${GDSV_INTERVAL:-0.5}" --gds-stats "$GDS_STATS" --out "$OUT"
rc=$?
[ "$rc" = 0 ] || GDSV_FAILED+=("watch_overhead.py (rc=$rc: no round measured both ways)")

# the disk's own noise hides a 1 % difference; from the page cache the job is steadier and faster
say "the same, the disk out of the way: $CACHED_ROUNDS rounds of ${CACHED_T}s of -x 4 (page cache, then cudaMemcpy)"
cat "$DATA"/big/* >/dev/null	# the whole set into the page cache, then one run unmeasured
"$GDS" -D "$DATA/big" -x 4 -I 0 -w 8 -s "$BIG" -i 1M -T 2 -d "$GPU" >/dev/null 2>&1
"$PY" "$HERE/watch_overhead.py" --gdsbench "$GDS" --dir "$DATA/big" --gpu "$GPU" --xfer 4 --rounds "$CACHED_ROUNDS" \
	--seconds "$CACHED_T" --size "$BIG" --interval "${GDSV_INTERVAL:-0.5}" --gds-stats "" --out "$OUT/cached"
rc=$?
[ "$rc" = 0 ] || GDSV_FAILED+=("watch_overhead.py -x 4 (rc=$rc: no round measured both ways)")

rm -rf "$JSONDIR" "$DATA/big"
echo "gpu_watch: $(( $(date +%s) - T0 )) s"
gdsv_verdict gpu_watch
