#!/usr/bin/env bash
# Read parity on a fresh GPU machine, in one command:
#
#   bench/parity.sh [DATA_DIR]     on the GPU machine, with .peers/carry/ carried (below)
#   bench/parity.sh fetch          here, with a network: Debian's fio source into .peers/carry/
#
# 1. builds gdsbench against CUDA_HOME (gpu_lib.sh) and, in the background, fio with its
#    libcufile engine from Debian's source (.peers/carry/fio_*.orig.tar.gz; a carried
#    .peers/carry/fio-cufile that starts is used as it is); finds a data directory on ext4/xfs
#    and creates the udev record cuFile needs when it is missing;
# 2. 8 files x PARITY_SIZE (1G), written once by gdsbench -x 1;
# 3. PARITY_ROUNDS rounds (5; at least 5 must complete), each tool once per round, the order of
#    the tools rotating by one each round:
#      seqread   1 MiB, 8 workers, a file each: gdsbench default (-x 0), -x 6, -x 5 (both with
#                the default worker processes), -x 6 -P 1 and -x 5 -P 1 (threads; PARITY_THREADS=0
#                leaves them out); fio libcufile in 8 processes and --thread; fio psync O_DIRECT
#      randread  4 KiB, 32 workers over gdsbench.0: gdsbench default, -x 6, -x 5; fio libcufile
#                --thread; fio psync O_DIRECT
#      PARITY_SEQ_TOOLS / PARITY_RAND_TOOLS choose others; a gdsbench tool named NAME-s0 runs
#      with cuFile's statistics off (--cufile-stats 0); PARITY_VARIANTS="b2=-x 6 -B 2;..." makes
#      tools gdsbench-b2 ... of those arguments (a sweep)
# 4. the table (bench/parity.py): per mode and round the figure, its ratio to the best
#    GPU-landing peer of the round (fio libcufile, processes or --thread) and to plain O_DIRECT,
#    the mean ratio with a bootstrap 95 % interval, the lowest round; $OUT/parity.md,
#    parity.json, runs.jsonl, log.txt.
#
# Exit status: 0 when every step ran (builds, data, every run, at least 5 rounds); 1 when a step
# failed (each named; a round with a failed run is the last one, sparing the device's time); with PARITY_REQUIRE=1, 3 when a gdsbench mode was below the peer (or
# unknown) in a round. Time: about 90 s of builds and data, then about 75 s per round at
# PARITY_T=3 (13 runs): 5 rounds fit one 10-minute device call; a round that would end past
# PARITY_BUDGET (540 s) is not started.
# Environment: OUT (bench/obj/parity), PARITY_MEDIUM (disk, or ram: see step 2), PARITY_ROUNDS (5), PARITY_T (3), PARITY_SIZE (1G),
# PARITY_GPU (0), PARITY_THREADS (1), PARITY_BUDGET (540), PARITY_REQUIRE (0), CUDA_HOME
# (/usr/local/cuda); PARITY_GDSBENCH / PARITY_FIO: binaries to use instead of building them.
#
# The lead's one call (the device tool; .peers holds what `bench/parity.sh fetch` put there):
#   run(command="OUT=$OUT/parity bash bench/parity.sh", carry=[".peers"], timeout_s=600)
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
CARRY=$ROOT/.peers/carry

# fetch: fio's source as Debian ships it, through apt-get with a private source list and state
# (the machine's own apt configuration is left as it is)
if [ "${1:-}" = fetch ]; then
	. /etc/os-release
	tmp=$(mktemp -d)
	mkdir -p "$tmp/lists/partial" "$CARRY" || exit 1
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian ${PARITY_FIO_SUITE:-$VERSION_CODENAME} main" >"$tmp/sources.list"
	apt=(apt-get -o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$tmp/lists" -o APT::Get::List-Cleanup=0)
	"${apt[@]}" update >"$tmp/update.log" 2>&1 || { echo "parity: fetch: apt-get update failed:"; tail -5 "$tmp/update.log"; exit 1; }
	(cd "$CARRY" && "${apt[@]}" source --download-only fio) || { echo "parity: fetch: apt-get source fio failed"; exit 1; }
	rm -rf "$tmp"
	ls -la "$CARRY"/fio_*
	exit 0
fi

OUT=${OUT:-$HERE/obj/parity}
T=${PARITY_T:-3}
BIG=${PARITY_SIZE:-1G}
GPU=${PARITY_GPU:-0}
ROUNDS=${PARITY_ROUNDS:-5}
MIN_ROUNDS=5
BUDGET=${PARITY_BUDGET:-540}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# shellcheck source-path=SCRIPTDIR source=gpu_lib.sh
. "$HERE/gpu_lib.sh"
gdsv_rounds_init
STEPS_FAILED=()
step_failed() { echo "STEP FAILED: $*"; STEPS_FAILED+=("$*"); }
finish() {	# finish: the verdict of the steps; the exit status
	if [ "${#STEPS_FAILED[@]}" -gt 0 ]; then
		echo "parity: FAILED: ${#STEPS_FAILED[@]} step(s):"
		printf '  %s\n' "${STEPS_FAILED[@]}"
	fi
	gdsv_verdict parity || STEPS_FAILED+=("gdsbench runs")
	echo "elapsed: $(( $(date +%s) - T0 )) s"
	[ "${#STEPS_FAILED[@]}" -eq 0 ] || exit 1
}
gdsv_environment

# ---- 1. gdsbench and fio (its build in the background while gdsbench builds) ----
FIO_BG=""
FIO=${PARITY_FIO:-}
if [ -z "$FIO" ] && [ -x "$CARRY/fio-cufile" ] && "$CARRY/fio-cufile" --version >/dev/null 2>&1; then
	FIO=$CARRY/fio-cufile
elif [ -z "$FIO" ] && ! fio_build_start; then
	step_failed "fio: neither $CARRY/fio-cufile nor $CARRY/fio_*.orig.tar.gz (run bench/parity.sh fetch, carry .peers)"
fi
if [ -n "${PARITY_GDSBENCH:-}" ]; then
	GDS=$PARITY_GDSBENCH
	"$GDS" --version || step_failed "gdsbench: $GDS does not start"
else
	gdsv_build	# exits 1 naming the failure
fi
if [ -n "$FIO_BG" ]; then
	fio_build_wait
	[ -n "$FIO" ] || step_failed "fio: the build from the carried source failed (log: $OUT/fio-build.log)"
fi
if [ -n "$FIO" ] && ! "$FIO" --enghelp=libcufile >"$OUT/fio-enghelp.txt" 2>&1; then
	step_failed "fio: $FIO has no libcufile engine ($(head -c 200 "$OUT/fio-enghelp.txt"))"
fi
echo "fio: ${FIO:-none}${FIO:+ ($("$FIO" --version 2>&1))}"
[ "${#STEPS_FAILED[@]}" -eq 0 ] || finish

# ---- 2. data ----
# PARITY_MEDIUM=ram: an ext4 file system on a loop device over a file in /dev/shm (gpu_lib.sh's ram_medium), made here and
# removed at exit (only what this script made): the drive's own spread (1.2-3.2 GiB/s between
# rounds on the rented machines' virtio disk) leaves the software paths alone in the comparison.
trap ram_medium_remove EXIT
if [ "${PARITY_MEDIUM:-disk}" = ram ]; then
	if ram_medium; then
		set -- "$RAM_MNT/data"
	else
		ram_medium_remove
		step_failed "ram medium: could not make a loop device over /dev/shm (PARITY_MEDIUM=ram)"
		finish
	fi
fi
gdsv_data_dir "${1:-}"
gdsv_udev
say "data set: 8 x $BIG files (sequential O_DIRECT write, 8 threads)"
# scratch of this run's own, made here and removed at the end: never a user's $DATA/parity
D=$(mktemp -d "$DATA/parity.XXXXXX") || { step_failed "data: cannot make a scratch directory in $DATA"; finish; }
gds "create-8x$BIG" -D "$D" -w 8 -s "$BIG" -i 1M -x 1 -I 1 || step_failed "data: gdsbench could not write 8 x $BIG in $D"
sync
F0=$D/gdsbench.0
[ "${#STEPS_FAILED[@]}" -eq 0 ] || finish

# ---- 3. the rounds ----
FIO_MUST_PASS=1	# the peers are the point: a failed fio run fails the script
variant_args() {	# variant_args NAME: the ARGS of NAME=ARGS in PARITY_VARIANTS (';' between variants)
	local v
	IFS=';' read -r -a v <<<"${PARITY_VARIANTS:-}"
	for v in "${v[@]}"; do
		[ "${v%%=*}" = "$1" ] && { printf '%s\n' "${v#*=}"; return; }
	done
}
# Every run starts with the page cache dropped (PARITY_DROP_CACHES=0 leaves it): cuFile's compat
# batch path reads through the page cache (bench/served_from.sh: 2-4 GB of the file cached after
# one -x 6 run), and a later run served from memory would measure memory, not the drive.
tool_run() {	# tool_run ROUND WORKLOAD TOOL
	local r=$1 wl=$2 tool=$3
	if [ "${PARITY_DROP_CACHES:-1}" = 1 ] && ! drop_page_cache; then
		step_failed "cannot drop the page cache (PARITY_DROP_CACHES=0 to run without)"
	fi
	local -a g f cuf=(--ioengine=libcufile --cuda_io=cufile --gpu_dev_ids="$GPU")
	if [ "$wl" = seqread ]; then
		g=(-D "$D" -w 8 -s "$BIG" -d "$GPU" -i 1M -I 0 -T "$T")
		f=(--filename_format="$D/gdsbench.\$jobnum" --numjobs=8 --size="$BIG" --bs=1M --rw=read)
	else
		g=(-f "$F0" -w 32 -s "$BIG" -k "$r" -d "$GPU" -i 4K -I 2 -T "$T")
		f=(--filename="$F0" --numjobs=32 --randrepeat=0 --size="$BIG" --bs=4k --rw=randread)
	fi
	# NAME-s0: the same gdsbench mode with cuFile's statistics off (--cufile-stats 0; level 3,
	# the default, gives the path evidence)
	case $tool in
	gdsbench-*-s0) g+=(--cufile-stats 0) ;;
	esac
	# gdsbench-NAME where PARITY_VARIANTS has NAME=ARGS: gdsbench with those arguments
	local variant
	variant=$(variant_args "${tool#gdsbench-}")
	if [ -n "$variant" ]; then
		local -a extra
		read -r -a extra <<<"$variant"
		round_gds "$r" "$wl" "$tool" "${g[@]}" "${extra[@]}"
		return
	fi
	case ${tool%-s0} in
	gdsbench-default) round_gds "$r" "$wl" "$tool" "${g[@]}" -x 0 ;;
	gdsbench-x6) round_gds "$r" "$wl" "$tool" "${g[@]}" -x 6 ;;
	gdsbench-x5) round_gds "$r" "$wl" "$tool" "${g[@]}" -x 5 ;;
	gdsbench-x6-threads) round_gds "$r" "$wl" "$tool" "${g[@]}" -x 6 -P 1 ;;
	gdsbench-x5-threads) round_gds "$r" "$wl" "$tool" "${g[@]}" -x 5 -P 1 ;;
	fio-cufile-procs) round_fio "$r" "$wl" "$tool" "${f[@]}" "${cuf[@]}" ;;
	fio-cufile-threads) round_fio "$r" "$wl" "$tool" "${f[@]}" "${cuf[@]}" --thread ;;
	fio-psync) round_fio "$r" "$wl" "$tool" "${f[@]}" --ioengine=psync ;;
	*) step_failed "parity: unknown tool $tool" ;;
	esac
}
SEQ_TOOLS=(gdsbench-default gdsbench-x6 gdsbench-x5 fio-cufile-procs fio-cufile-threads fio-psync)
[ "${PARITY_THREADS:-1}" = 1 ] && SEQ_TOOLS+=(gdsbench-x6-threads gdsbench-x5-threads)
RAND_TOOLS=(gdsbench-default gdsbench-x6 gdsbench-x5 fio-cufile-threads fio-psync)
[ -n "${PARITY_SEQ_TOOLS:-}" ] && read -r -a SEQ_TOOLS <<<"$PARITY_SEQ_TOOLS"
[ -n "${PARITY_RAND_TOOLS:-}" ] && read -r -a RAND_TOOLS <<<"$PARITY_RAND_TOOLS"
DONE=0
LAST=0
for r in $(seq 1 "$ROUNDS"); do
	now=$(( $(date +%s) - T0 ))
	if [ "$r" -gt 1 ] && [ $(( now + LAST )) -gt "$BUDGET" ]; then
		echo "round $r not started: ${now} s so far + ${LAST} s a round would pass PARITY_BUDGET ($BUDGET s)"
		break
	fi
	say "round $r of $ROUNDS (${T}s per run; ${now} s so far)"
	start=$(date +%s)
	for k in $(seq 0 $(( ${#SEQ_TOOLS[@]} - 1 ))); do
		tool_run "$r" seqread "${SEQ_TOOLS[$(( (k + r - 1) % ${#SEQ_TOOLS[@]} ))]}"
	done
	for k in $(seq 0 $(( ${#RAND_TOOLS[@]} - 1 ))); do
		tool_run "$r" randread "${RAND_TOOLS[$(( (k + r - 1) % ${#RAND_TOOLS[@]} ))]}"
	done
	LAST=$(( $(date +%s) - start ))
	DONE=$r
	if [ "${#GDSV_FAILED[@]}" -gt 0 ]; then
		step_failed "round $r: ${#GDSV_FAILED[@]} run(s) failed (named below): no more rounds"
		break
	fi
done
[ "$DONE" -ge "$MIN_ROUNDS" ] || [ "${#GDSV_FAILED[@]}" -gt 0 ] || step_failed "rounds: $DONE completed, at least $MIN_ROUNDS are needed (PARITY_ROUNDS, PARITY_T, PARITY_BUDGET)"

# ---- 4. the table ----
say "parity (also $OUT/parity.md, $OUT/parity.json)"
req=()
[ "${PARITY_REQUIRE:-0}" = 1 ] && req=(--require)
python3 "$HERE/parity.py" table "$RUNS" "$OUT" --min-rounds "$MIN_ROUNDS" "${req[@]}"
prc=$?
case $prc in
0) ;;
3) echo "parity: PARITY_REQUIRE=1 and a mode missed parity (above)" ;;
4) step_failed "table: fewer than $MIN_ROUNDS rounds with a peer figure" ;;
*) step_failed "table: bench/parity.py exited $prc" ;;
esac
rm -rf "$JSONDIR" "$D"
finish
[ "$prc" = 3 ] && exit 3
exit 0
