#!/usr/bin/env bash
# GPU validation of gdsbench on a node with CUDA + libcufile (no nvidia-fs
# needed: cuFile then runs in compat mode, and path.mode must say so).
#
#   bench/gpu_validate.sh [DATA_DIR]
#
# 1. builds gdsbench (the gds_bench role's files/bench) against $CUDA_HOME (/usr/local/cuda);
# 2. makes sure cuFile can register files on DATA_DIR's file system: the udev
#    record /run/udev/data/b<major>:<minor> of its block device (major:minor
#    read from the directory, never assumed), created only when missing;
# 3. correctness: transfer types 0 2 4 5 6 (and 1), write then read, with -V;
#    -x 5's buffer hand-over ways (slot, unreg; region is a DIAGNOSTIC expected
#    to fail: libcufile 1.15 moves wrong data with one registered region and
#    per-op buffer offsets), a corrupted block that must be caught;
# 4. performance on 8 x 1 GiB files: 1 MiB sequential reads with 8 threads and
#    4 KiB random reads with 32 threads, for every cuFile type and plain O_DIRECT;
# 5. peers in the same run when carried: fio with its libcufile engine
#    (.peers/carry/fio-cufile, or built from .peers/carry/fio_*.orig.tar.gz)
#    and KvikIO's single_node_io benchmark (.whl/);
# 6. prints one table (also $OUT/table.txt) and keeps every JSON record.
# `seq-x0` runs 8 threads (-P 1), `seq-x0-default` gdsbench's default for this job (8
# processes). Writes against the peers and the rounds' ratio table: bench/side_by_side.sh.
#
# Exit status: 0 when every run that had to pass passed; 1 otherwise, each
# failed run named at the end (a diagnostic expected to fail never fails it).
#
# Environment: OUT (results; default bench/obj/gpu_validate), GDSV_T (seconds
# per timed run, default 8), GDSV_SWEEP=1 (queue-depth sweep for -x 5/6),
# GDSV_PEERS=0 (skip peers), GDSV_DIAG=0 (skip the diagnostics), GDSV_GPU
# (default 0), CUDA_HOME.
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$HERE/obj/gpu_validate}
T=${GDSV_T:-8}
BIG=${GDSV_BIG_SIZE:-1G}	# per-file size of the performance data set
GPU=${GDSV_GPU:-0}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# shellcheck source-path=SCRIPTDIR source=gpu_lib.sh
. "$HERE/gpu_lib.sh"
gdsv_init
gdsv_setup "${1:-}"

say "correctness: write then read with -V, 4 threads x 64 MiB"
mkdir -p "$DATA/small"
for x in 1 0 2 4 5 6; do
	rm -f "$DATA"/small/gdsbench.*
	gds "verify-x$x-write" -D "$DATA/small" -d "$GPU" -w 4 -s 64M -i 1M -x "$x" -I 1 -V
	gds "verify-x$x-read" -D "$DATA/small" -d "$GPU" -w 4 -i 1M -x "$x" -I 0 -V
	gds "verify-x$x-randwrite" -D "$DATA/small" -d "$GPU" -w 4 -i 64K -x "$x" -I 3 -V -T 1
	gds "verify-x$x-randread" -D "$DATA/small" -d "$GPU" -w 4 -i 4K -x "$x" -I 2 -V -T 1
done
# The stream API's buffer hand-over, each way (GDSBENCH_ASYNC_BUF, see engine_async.c):
# slot (the default) and unreg must pass; region is the known libcufile failure, kept as a
# diagnostic that is expected to fail.
x5() {	# x5 MODE NAME ARGS...
	local m=$1 name=$2; shift 2
	if [ "$m" = region ]; then
		GDSBENCH_ASYNC_BUF=$m gds_diag "$name" "$@"
	else
		GDSBENCH_ASYNC_BUF=$m gds "$name" "$@"
	fi
}
for m in slot region unreg; do
	rm -f "$DATA"/small/gdsbench.*
	x5 "$m" "x5diag-$m-write" -D "$DATA/small" -d "$GPU" -w 4 -s 64M -i 1M -x 5 -I 1 -V
	x5 "$m" "x5diag-$m-read" -D "$DATA/small" -d "$GPU" -w 4 -i 1M -x 5 -I 0 -V
done
rm -f "$DATA"/small/gdsbench.*
gds "x5diag-x1-write" -D "$DATA/small" -w 4 -s 64M -i 1M -x 1 -I 1
for m in slot region unreg; do
	x5 "$m" "x5diag-$m-read-x1data" -D "$DATA/small" -d "$GPU" -w 4 -i 1M -x 5 -I 0 -V
done
# a corrupted block must be caught by a GPU read as well
printf 'CORRUPT!' | dd of="$DATA/small/gdsbench.2" bs=1 seek=$((5 * 1048576 + 100)) conv=notrunc status=none
gds_must_fail "verify-x0-corrupt" -D "$DATA/small" -d "$GPU" -w 4 -i 1M -x 0 -I 0 -V

say "data set: 8 x $BIG files (sequential O_DIRECT write, 8 threads)"
mkdir -p "$DATA/big"
gds "create-8x$BIG" -D "$DATA/big" -w 8 -s "$BIG" -i 1M -x 1 -I 1
sync

say "sequential 1 MiB reads, 8 threads, ${T}s each (alternating tools)"
FIO=""
[ "${GDSV_PEERS:-1}" = 1 ] && gdsv_find_fio
FILES8=$(for i in 0 1 2 3 4 5 6 7; do printf '%s/big/gdsbench.%d:' "$DATA" "$i"; done); FILES8=${FILES8%:}
ROUNDS=${GDSV_ROUNDS:-2}
for round in $(seq 1 "$ROUNDS"); do
	gds "seq-x1-r$round" -D "$DATA/big" -w 8 -i 1M -x 1 -I 0 -T "$T"
	fio_seq "seq-fio-psync-r$round" --ioengine=psync
	gds "seq-x0-r$round" -D "$DATA/big" -d "$GPU" -w 8 -i 1M -x 0 -I 0 -T "$T" -P 1
	gds "seq-x0-default-r$round" -D "$DATA/big" -d "$GPU" -w 8 -i 1M -x 0 -I 0 -T "$T"
	fio_seq "seq-fio-cufile-r$round" --ioengine=libcufile --cuda_io=cufile --gpu_dev_ids="$GPU"
	gds "seq-x6-r$round" -D "$DATA/big" -d "$GPU" -w 8 -i 1M -x 6 -I 0 -T "$T" -B "${GDSV_SEQ_B6:-4}"
	fio_seq "seq-fio-cufile-thread-r$round" --ioengine=libcufile --cuda_io=cufile --gpu_dev_ids="$GPU" --thread
	gds "seq-x0-iothr-r$round" -D "$DATA/big" -d "$GPU" -w 8 -i 1M -x 0 -I 0 -T "$T" -P 1 --cufile-param max_io_threads=32
done
gds "seq-x5" -D "$DATA/big" -d "$GPU" -w 8 -i 1M -x 5 -I 0 -T "$T" -B "${GDSV_SEQ_B5:-4}"
gds "seq-x2" -D "$DATA/big" -d "$GPU" -w 8 -i 1M -x 2 -I 0 -T "$T"

say "random 4 KiB reads, 32 threads over $DATA/big/gdsbench.0 ($BIG), ${T}s each"
F0=$DATA/big/gdsbench.0
for round in $(seq 1 "$ROUNDS"); do
	gds "rand-x1-r$round" -f "$F0" -w 32 -i 4K -x 1 -I 2 -T "$T" -k "$round"
	fio_rand "rand-fio-psync-r$round" --ioengine=psync
	gds "rand-x0-r$round" -f "$F0" -d "$GPU" -w 32 -i 4K -x 0 -I 2 -T "$T" -k "$round"
	fio_rand "rand-fio-cufile-thread-r$round" --ioengine=libcufile --cuda_io=cufile --gpu_dev_ids="$GPU" --thread
	gds "rand-x6-B2-r$round" -f "$F0" -d "$GPU" -w 32 -i 4K -x 6 -I 2 -T "$T" -k "$round" -B 2
done
fio_rand "rand-fio-cufile" --ioengine=libcufile --cuda_io=cufile --gpu_dev_ids="$GPU"
gds "rand-x5-B4" -f "$F0" -d "$GPU" -w 32 -i 4K -x 5 -I 2 -T "$T" -B 4

if [ "${GDSV_SWEEP:-0}" = 1 ]; then
	say "queue-depth sweep (-B), ${GDSV_SWEEP_T:-4}s each"
	for b in 2 4 16 32; do
		gds "sweep-seq-x6-B$b" -D "$DATA/big" -d "$GPU" -w 8 -i 1M -x 6 -I 0 -T "${GDSV_SWEEP_T:-4}" -B $b
		gds "sweep-rand-x6-B$b" -f "$F0" -d "$GPU" -w 32 -i 4K -x 6 -I 2 -T "${GDSV_SWEEP_T:-4}" -B $b
	done
	for b in 2 8 16; do
		gds "sweep-seq-x5-B$b" -D "$DATA/big" -d "$GPU" -w 8 -i 1M -x 5 -I 0 -T "${GDSV_SWEEP_T:-4}" -B $b
		gds "sweep-rand-x5-B$b" -f "$F0" -d "$GPU" -w 32 -i 4K -x 5 -I 2 -T "${GDSV_SWEEP_T:-4}" -B $b
	done
	gds "sweep-seq-x0-nostats" -D "$DATA/big" -d "$GPU" -w 8 -i 1M -x 0 -I 0 -T "${GDSV_SWEEP_T:-4}" --cufile-stats 0
	gds "sweep-rand-x0-nostats" -f "$F0" -d "$GPU" -w 32 -i 4K -x 0 -I 2 -T "${GDSV_SWEEP_T:-4}" --cufile-stats 0
fi

[ "${GDSV_PEERS:-1}" = 1 ] && gdsv_kvikio "${GDSV_KVIKIO_API:-cufile-mfma}" "${GDSV_KVIKIO_BYTES:-8GiB}" 150

gdsv_table
rm -rf "$JSONDIR"
rm -rf "$DATA/small" "$DATA/big"
gdsv_verdict gpu_validate
