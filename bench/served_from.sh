#!/usr/bin/env bash
# Where a read's bytes came from: the drive, or the page cache.
#
#   bench/served_from.sh [DATA_DIR]     on the GPU machine (default: a RAM-backed ext4, gpu_lib.sh's
#                                       ram_medium, made and removed here)
#
# For each mode of SERVED_VARIANTS ("NAME=gdsbench ARGS;..."; default below) on 8 files of 1 GiB
# written once: drop the page cache, read the data drive's sectors read (/sys/dev/block/MAJ:MIN/
# stat) and the page cache's size (/proc/meminfo Cached), run the 1 MiB sequential read for
# SERVED_T seconds (3), read both again. A table: the bytes gdsbench reported, the bytes the drive
# moved, their ratio, the page cache's growth. A mode whose bytes did not come from the drive
# (drive / reported under 0.9) measured memory, not storage. Then each mode once more with -V:
# the data read is the data written (pattern by offset).
# Exit status: 0 when every step ran; 1 when a step failed (named). Writes $OUT/served.txt.
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$HERE/obj/served}
T=${SERVED_T:-3}
BIG=1G
GPU=${SERVED_GPU:-0}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
VARIANTS=${SERVED_VARIANTS:-"default=-x 0;default-s0=-x 0 --cufile-stats 0;batch=-x 6;batch-pio0=-x 6 --cufile-param parallel_io=false;batch-B2=-x 6 -B 2;stream=-x 5;host-direct=-x 1"}
# shellcheck source-path=SCRIPTDIR source=gpu_lib.sh
. "$HERE/gpu_lib.sh"
gdsv_init
FAILED=()
failed() { echo "STEP FAILED: $*"; FAILED+=("$*"); }
finish() {
	if [ "${#FAILED[@]}" -gt 0 ]; then
		echo "served_from: FAILED: ${#FAILED[@]} step(s):"
		printf '  %s\n' "${FAILED[@]}"
		exit 1
	fi
	exit 0
}
trap ram_medium_remove EXIT

gdsv_environment
if [ -n "${SERVED_GDSBENCH:-}" ]; then	# a gdsbench to use instead of building one (tests)
	GDS=$SERVED_GDSBENCH
else
	gdsv_build
fi
if [ -z "${1:-}" ]; then
	ram_medium || { ram_medium_remove; failed "ram medium: no loop device over /dev/shm"; finish; }
	set -- "$RAM_MNT/data"
fi
gdsv_data_dir "$1"
gdsv_udev
MM=$(findmnt -no MAJ:MIN -T "$DATA" | tr -d ' ')
STAT=${SERVED_STAT:-/sys/dev/block/$MM/stat}	# SERVED_STAT: another file of that layout (tests)
[ -r "$STAT" ] || { failed "cannot read $STAT (the data drive's counters)"; finish; }
D=$(mktemp -d "$DATA/served.XXXXXX") || { failed "data: cannot make a scratch directory in $DATA"; finish; }
say "data set: 8 x $BIG (O_DIRECT writes, the pattern by offset)"
# every gdsbench run through gpu_lib.sh's gds_run: bounded by timeout, its JSON record in $JSONDIR
gds_run must-pass served-data -D "$D" -w 8 -s "$BIG" -i 1M -x 1 -I 1 || { failed "data: gdsbench could not write 8 x $BIG in $D"; finish; }
sync

sectors_read() { awk '{print $3}' "$STAT"; }
cached_kb() { awk '$1 == "Cached:" {print $2}' /proc/meminfo; }
TABLE=$OUT/served.txt
printf '%-12s %10s %12s %12s %7s %14s  %s\n' mode GiB/s reported_MB drive_MB drive/rep cache_growth_MB args | tee "$TABLE"
IFS=';' read -r -a LIST <<<"$VARIANTS"
for v in "${LIST[@]}"; do
	name=${v%%=*}
	read -r -a args <<<"${v#*=}"
	if ! drop_page_cache; then
		failed "$name: cannot drop the page cache"
		continue
	fi
	s0=$(sectors_read) c0=$(cached_kb)
	gds_run must-pass "served-$name" -D "$D" -w 8 -s "$BIG" -d "$GPU" -i 1M -I 0 -T "$T" "${args[@]}"
	rc=$?
	s1=$(sectors_read) c1=$(cached_kb)
	# the row from gdsbench's own record: the bytes it reported against the drive's sectors read
	if [ "$rc" -ne 0 ] || ! python3 - "$JSONDIR/served-$name.json" "$name" "$((s1 - s0))" "$((c1 - c0))" "${args[*]}" <<'PY' | tee -a "$TABLE"
import json, sys
path, name, sectors, cached_kb, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
try:
    record = json.load(open(path))
    reported, gib = record["bytes"] / 1e6, record["throughput_gib_s"]
except (OSError, ValueError, KeyError, TypeError):
    sys.exit(1)
drive = sectors * 512 / 1e6
print("%-12s %10.6f %12.0f %12.0f %7.2f %14.0f  %s" % (name, gib, reported, drive, drive / reported if reported else 0,
                                                     cached_kb / 1024, args))
PY
	then
		failed "$name: gdsbench exited $rc or wrote no record"
	fi
done

say "each mode once with -V (the data read is the data written)"
for v in "${LIST[@]}"; do
	name=${v%%=*}
	read -r -a args <<<"${v#*=}"
	if gds_run must-pass "verify-$name" -D "$D" -w 8 -s 256M -d "$GPU" -i 1M -I 0 -V "${args[@]}" >"$OUT/verify-$name.txt" 2>&1; then
		echo "verify $name: the data read is the data written" | tee -a "$TABLE"
	else
		tail -3 "$OUT/verify-$name.txt"
		failed "verify $name: gdsbench -V failed ($OUT/verify-$name.txt)"
	fi
done
rm -rf "$D"
finish
