#!/usr/bin/env bash
# The whole side-by-side set on a GPU node, in one command:
#
#   GDSV_ROUNDS=3 bench/side_by_side.sh [DATA_DIR]
#
# 1. builds gdsbench, bench/probe/cufile_probe and (when not carried) fio with its
#    libcufile engine, finds a data directory on ext4/xfs and its udev record (gpu_lib.sh);
# 2. 8 files x GDSV_BIG_SIZE (1G), written once;
# 3. cufile_probe: the same cuFileRead/cuFileWrite loop with 8 threads of one process and
#    8 processes, and the same bytes through pread/pwrite + cudaMemcpy (no libcufile), in
#    GDSV_PROBE_ROUNDS rounds (GDSV_PROBE=0 skips it);
# 4. GDSV_ROUNDS rounds; in each, four workloads, every tool once, the order of the tools
#    rotating by one each round:
#      seqread / seqwrite  1 MiB, 8 workers, one file each (gdsbench -D, fio filename_format)
#      randread / randwrite 4 KiB, 32 workers over gdsbench.0
#    tools (GDSV_TOOLS): gdsbench -x 0 threads (-P 1), gdsbench -x 0 -P GDSV_PROCS, gdsbench -x 6,
#           fio libcufile (processes, its default), fio libcufile --thread, fio psync O_DIRECT,
#           and once per round KvikIO's single_node_io (cufile-mfma: 8 files, 8 arrays; its read and write lines
#           count for seqread/seqwrite) when its wheels are in .whl/; gdsbench-default (-x 0
#           without -P) on request; workloads: GDSV_WORKLOADS;
# 5. $OUT/runs.jsonl (every run), $OUT/side_by_side.md and .json: per workload and tool the
#    value of each round, the ratio to the best peer of that round and the ratios' spread
#    (min/median/max), and the probe's table.
#
# Exit status: 0 when every gdsbench run passed, 1 otherwise (each failed run named).
# Time: about 100 s of builds, data and probe, then about 150 s per round at GDSV_T=3 (H100 node):
# GDSV_ROUNDS=2 fits one 10-minute device call.
# Environment: OUT (default bench/obj/side_by_side), GDSV_ROUNDS (3), GDSV_T (seconds per run, 3),
# GDSV_PROCS (8), GDSV_PROBE (1), GDSV_PROBE_ROUNDS (2), GDSV_KVIKIO (1), GDSV_KVIKIO_BYTES
# (4GiB), GDSV_PEERS=0 (no fio, no KvikIO), GDSV_TOOLS, GDSV_WORKLOADS, GDSV_BIG_SIZE (1G),
# GDSV_GPU (0), CUDA_HOME.
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$HERE/obj/side_by_side}
T=${GDSV_T:-3}
BIG=${GDSV_BIG_SIZE:-1G}
GPU=${GDSV_GPU:-0}
NP=${GDSV_PROCS:-8}
ROUNDS=${GDSV_ROUNDS:-3}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# shellcheck source-path=SCRIPTDIR source=gpu_lib.sh
. "$HERE/gpu_lib.sh"
gdsv_rounds_init
gdsv_environment
# where threads and buffers can be placed: NUMA nodes, the GPU's node, the CPUs
echo "NUMA nodes: $(find /sys/devices/system/node -maxdepth 1 -name "node[0-9]*" 2>/dev/null | wc -l); online CPUs: $(nproc)"
for g in /sys/bus/pci/devices/*; do
	[ "$(cat "$g/vendor" 2>/dev/null)" = 0x10de ] && [ "$(cut -c1-6 "$g/class" 2>/dev/null)" = 0x0302 ] \
		&& echo "GPU $(basename "$g") numa_node $(cat "$g/numa_node" 2>/dev/null)"
done

# fio builds in the background while gdsbench and the probe build
FIO=""
FIO_BG=""
if [ "${GDSV_PEERS:-1}" = 0 ]; then
	echo "fio: GDSV_PEERS=0: no fio rows"
elif [ -x "$ROOT/.peers/carry/fio-cufile" ]; then
	gdsv_find_fio
elif ! fio_build_start; then
	echo "fio: neither .peers/carry/fio-cufile nor .peers/carry/fio_*.orig.tar.gz: no fio rows"
fi
gdsv_build
PROBE=""
if make -C "$HERE/probe" CUDA_HOME="$CUDA_HOME" >"$OUT/probe-build.log" 2>&1; then
	PROBE=$HERE/probe/cufile_probe
else
	echo "cufile_probe: build failed:"; tail -n 15 "$OUT/probe-build.log" | sed 's/^/  | /'
fi
if [ -n "$FIO_BG" ]; then
	fio_build_wait
	echo "fio: ${FIO:-not available}${FIO:+ ($("$FIO" --version))}"
fi
gdsv_data_dir "${1:-}"
gdsv_udev

say "data set: 8 x $BIG files (sequential O_DIRECT write, 8 threads)"
# scratch of this run's own, made here and removed at the end: never a user's $DATA/sbs
D=$(mktemp -d "$DATA/sbs.XXXXXX") || { echo "data: cannot make a scratch directory in $DATA"; exit 1; }
gds "create-8x$BIG" -D "$D" -w 8 -s "$BIG" -i 1M -x 1 -I 1
sync
F0=$D/gdsbench.0

# ---- one run of each kind, recorded ----
LIMIT=$(( ${T%.*} + 90 ))
rec() {	# rec ROUND WORKLOAD TOOL KIND RESULT RC CMD...
	$SBS record "$RUNS" "$@"
}
KVIKIO_OK=0
if [ "${GDSV_KVIKIO:-1}" = 1 ] && [ "${GDSV_PEERS:-1}" = 1 ] && ls "$ROOT"/.whl/*kvikio*.whl >/dev/null 2>&1; then
	"$ROOT/scripts/carry-wheels.sh" install kvikio /tmp/kvsite >"$OUT/kvikio-install.log" 2>&1 && KVIKIO_OK=1
	[ "$KVIKIO_OK" = 1 ] || { echo "KvikIO: install failed:"; tail -5 "$OUT/kvikio-install.log"; }
fi
k_run() {	# k_run ROUND: KvikIO's write then read of GDSV_KVIKIO_BYTES, 8 threads, through libcufile
	local r=$1 txt=$JSONDIR/kvikio-r$1.txt rc
	[ "$KVIKIO_OK" = 1 ] || return 0
	local dir
	dir=$(mktemp -d "$DATA/kvikio.XXXXXX") || return 0
	echo "+ kvikio single_node_io -n ${GDSV_KVIKIO_BYTES:-4GiB} -t 8 --api cufile-mfma"
	KVIKIO_COMPAT_MODE=OFF PYTHONPATH=/tmp/kvsite timeout 120 python3 -m kvikio.benchmarks.single_node_io \
		-n "${GDSV_KVIKIO_BYTES:-4GiB}" -t 8 -d "$dir" --api cufile-mfma --nruns 1 >"$txt" 2>&1
	rc=$?
	grep -E "(read|write) *\|" "$txt" || tail -n 5 "$txt"
	cp "$txt" "$OUT/kvikio-r$r.txt" 2>/dev/null
	rec "$r" seqread kvikio kvikio "$txt" "$rc" kvikio single_node_io -n "${GDSV_KVIKIO_BYTES:-4GiB}" -t 8 --api cufile-mfma
	rm -rf "$dir"
}

# ---- the threads-vs-processes probe ----
if [ -n "$PROBE" ] && [ "${GDSV_PROBE:-1}" = 1 ]; then
	say "cufile_probe: 8 threads of one process against 8 processes, ${T}s each"
	p_run() {	# p_run ROUND WORKLOAD TOOL PROBE-ARGS...
		local r=$1 wl=$2 tool=$3 js rc; shift 3
		js=$JSONDIR/probe-$wl-$tool-r$r.json
		echo "+ cufile_probe $*"
		timeout -k 5 "$LIMIT" "$PROBE" -T "$T" "$@" >"$js" 2>"$js.err"
		rc=$?
		cat "$js" "$js.err"
		rec "$r" "$wl" "$tool" probe "$js" "$rc" cufile_probe "$@"
	}
	for r in $(seq 1 "${GDSV_PROBE_ROUNDS:-2}"); do
		for m in threads procs; do
			p_run "$r" seqread "cufile-$m" -m "$m" -n 8 -D "$D" -o read -b 1M
			p_run "$r" seqread "posix-$m" -m "$m" -n 8 -D "$D" -o read -b 1M -E posix
			p_run "$r" seqwrite "cufile-$m" -m "$m" -n 8 -D "$D" -o write -b 1M
		done
	done
	# what a thread could change inside one cuFile instance
	p_run 1 seqread cufile-threads-unregistered -m threads -n 8 -D "$D" -o read -b 1M -U
	p_run 1 seqread cufile-threads-max_io_threads16 -m threads -n 8 -D "$D" -o read -b 1M -p max_io_threads=16
	p_run 1 seqread cufile-threads-parallel_io_off -m threads -n 8 -D "$D" -o read -b 1M -p parallel_io=false
	p_run 1 randread cufile-threads -m threads -n 32 -f "$F0" -o randread -b 4K
	p_run 1 randread cufile-procs -m procs -n 32 -f "$F0" -o randread -b 4K
fi

# ---- the rounds ----
tool_run() {	# tool_run ROUND WORKLOAD TOOL
	local r=$1 wl=$2 tool=$3 io rw gds_io
	local -a where fio_where
	case $wl in
	seqread) io=1M; rw="read"; gds_io=0 ;;
	seqwrite) io=1M; rw="write"; gds_io=1 ;;
	randread) io=4K; rw=randread; gds_io=2 ;;
	randwrite) io=4K; rw=randwrite; gds_io=3 ;;
	esac
	if [ "${wl#seq}" != "$wl" ]; then
		where=(-D "$D" -w 8 -s "$BIG")
		fio_where=(--filename_format="$D/gdsbench.\$jobnum" --numjobs=8)
	else
		where=(-f "$F0" -w 32 -s "$BIG" -k "$r")
		fio_where=(--filename="$F0" --numjobs=32 --randrepeat=0)
	fi
	local -a g=("${where[@]}" -d "$GPU" -i "$io" -I "$gds_io" -T "$T")
	local -a f=("${fio_where[@]}" --size="$BIG" --bs="$io" --rw="$rw")
	local -a cuf=(--ioengine=libcufile --cuda_io=cufile --gpu_dev_ids="$GPU")
	case $tool in
	gdsbench-default) round_gds "$r" "$wl" "$tool" "${g[@]}" -x 0 ;;
	gdsbench-threads) round_gds "$r" "$wl" "$tool" "${g[@]}" -x 0 -P 1 ;;
	gdsbench-procs) round_gds "$r" "$wl" "$tool" "${g[@]}" -x 0 -P "$NP" ;;
	gdsbench-x6) round_gds "$r" "$wl" "$tool" "${g[@]}" -x 6 ;;
	fio-cufile-procs) round_fio "$r" "$wl" "$tool" "${f[@]}" "${cuf[@]}" ;;
	fio-cufile-threads) round_fio "$r" "$wl" "$tool" "${f[@]}" "${cuf[@]}" --thread ;;
	fio-psync) round_fio "$r" "$wl" "$tool" "${f[@]}" --ioengine=psync ;;
	*) echo "side_by_side: unknown tool $tool in GDSV_TOOLS"; return 1 ;;
	esac
}
read -r -a TOOLS <<<"${GDSV_TOOLS:-gdsbench-threads gdsbench-procs gdsbench-x6 fio-cufile-procs fio-cufile-threads fio-psync}"
read -r -a WORKLOADS <<<"${GDSV_WORKLOADS:-seqwrite seqread randread randwrite}"
for r in $(seq 1 "$ROUNDS"); do
	say "round $r of $ROUNDS (${T}s per run; $(( $(date +%s) - T0 )) s so far)"
	for wl in "${WORKLOADS[@]}"; do
		for k in $(seq 0 $(( ${#TOOLS[@]} - 1 ))); do
			tool_run "$r" "$wl" "${TOOLS[$(( (k + r - 1) % ${#TOOLS[@]} ))]}"
		done
	done
	k_run "$r"
done

say "side by side (also $OUT/side_by_side.md, $OUT/side_by_side.json)"
$SBS table "$RUNS" "$OUT"
echo "elapsed: $(( $(date +%s) - T0 )) s"
rm -rf "$JSONDIR" "$D"
gdsv_verdict side_by_side
