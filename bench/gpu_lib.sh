# shellcheck shell=bash
# Sourced (not run) by bench/gpu_validate.sh, gpu_procs.sh, gpu_options.sh, side_by_side.sh: the steps
# every GPU measurement shares (scripts/gpu-commission.sh uses udev_record).
# The caller sets HERE ROOT OUT T BIG GPU CUDA_HOME first; gdsv_init sets up
# the rest (JSONDIR, ROWS, RECS, the log).
#
#   gdsv_init             result files under $OUT, log to $OUT/log.txt
#   gdsv_rounds_init      gdsv_init, then $RUNS (empty), $SBS and $T0 for a rotating-rounds script
#   gdsv_environment      machine, driver, GDS, nvidia-fs, cufile.json
#   gdsv_modules [FILE]   nvidia_fs / nvidia / nvme from /proc/modules (no lsmod needed)
#   gdsv_build            gdsbench in $GDSBENCH_SRC against $CUDA_HOME -> $GDS
#   gdsv_data_dir [DIR]   a directory on ext4/xfs on a /dev block device -> $DATA
#   gdsv_udev             the udev record cuFile needs for $DATA's block device
#   ram_medium / ram_medium_remove  ext4 on a loop device over /dev/shm (made, then removed)
#   drop_page_cache       sync and drop the page cache (DROP_CACHES_FILE); status 1 when it cannot
#   gdsv_setup [DIR]      the four above in order: environment, build, data dir, udev record
#   udev_record MM FST    create that record only when it is missing
#   gdsv_find_fio         fio with the libcufile engine (.peers/carry) -> $FIO
#   fio_build SRC DIR LOG build it from source; a failure names the step, log tail
#   fio_build_start / fio_build_wait  that build from the carried source in the background
#   gds NAME ARGS...      one gdsbench run that must pass (JSON record, table row)
#   gds_diag NAME ARGS... a diagnostic run expected to fail: labelled, never fails the script
#   gds_must_fail NAME .. a run that must fail (corrupted data): passing is a failure
#   fio_row NAME JSON RC  a table row from fio's JSON output
#   fio_seq / fio_rand NAME ARGS...  fio's sequential / random read peer rows
#   gdsv_table            the rows as one table ($OUT/table.txt)
#   round_gds / round_fio ROUND WORKLOAD TOOL ARGS...  one run of a rotating-rounds script
#                         (side_by_side.sh, parity.sh), recorded in $RUNS
#   gdsv_verdict SCRIPT   names every failed run; returns 1 when there is one

say() { printf '\n== %s\n' "$*"; }

# gdsbench's sources: what the gds_bench role ships to the nodes (the lab is outside the collection)
GDSBENCH_SRC=${GDSBENCH_SRC:-$ROOT/collections/ansible_collections/gds/commission/roles/gds_bench/files/bench}

gdsv_setup() {	# gdsv_setup [DIR]: what every measurement needs before its first run
	gdsv_environment
	gdsv_build
	gdsv_data_dir "${1:-}"
	gdsv_udev
}

gdsv_init() {
	JSONDIR=$(mktemp -d /tmp/gdsv-json.XXXXXX)	# every record also goes to $RECS
	mkdir -p "$OUT"
	LOG=$OUT/log.txt
	ROWS=$OUT/rows.tsv
	RECS=$OUT/records.jsonl
	: >"$ROWS"; : >"$RECS"
	exec > >(tee -a "$LOG") 2>&1
}

# the rotating-rounds scripts (side_by_side.sh, parity.sh): their runs go to $RUNS through
# side_by_side.py ($SBS); T0 is their start
gdsv_rounds_init() {
	gdsv_init
	# shellcheck disable=SC2034  # the scripts that source this file report it
	T0=$(date +%s)
	SBS="python3 $HERE/side_by_side.py"
	RUNS=$OUT/runs.jsonl
	: >"$RUNS"
}

# the log shows ls's own listing (or its error) of what is installed; nothing parses it
# shellcheck disable=SC2012
gdsv_environment() {
	say "environment ($(date -u +%FT%TZ))"
	uname -a
	nvidia-smi --query-gpu=name,driver_version,pci.bus_id,memory.total --format=csv,noheader 2>&1 | head -4
	nproc; free -g | head -2
	ls "$CUDA_HOME"/lib64/libcufile.so* 2>&1 | head -3
	grep -m1 -i "version" "$CUDA_HOME"/gds/README 2>/dev/null || true
	ls /proc/driver/nvidia-fs 2>&1 | head -2
	gdsv_modules /proc/modules
	ls -la /etc/cufile.json 2>&1
	# the settings that shape compat mode (threads, queue, bounce pools)
	grep -E '"(max_io_threads|max_io_queue_depth|parallel_io|max_request_parallelism|min_io_threshold_size_kb|max_device_cache_size_kb|per_buffer_cache_size_kb|allow_compat_mode|posix_pool_slab_size_kb|posix_pool_slab_count|use_poll_mode)"' \
		/etc/cufile.json 2>/dev/null | sed -e 's/^[[:space:]]*/  cufile.json: /' || true
}

# The modules that decide the path, read from /proc/modules (what lsmod formats;
# some nodes have no lsmod).
gdsv_modules() {
	local f=${1:-/proc/modules} others
	if [ ! -r "$f" ]; then
		echo "modules: $f is not readable"
		return 0
	fi
	if awk '$1 == "nvidia_fs" {found = 1} END {exit !found}' "$f"; then
		echo "nvidia_fs: loaded ($f)"
	else
		echo "nvidia_fs: not loaded ($f): cuFile can only use P2PDMA or its compat path"
	fi
	others=$(awk '$1 ~ /^(nvidia|nvidia_peermem|nvme|nvme_core|nvme_rdma)$/ {printf "%s%s", sep, $1; sep = " "}' "$f")
	echo "also loaded: ${others:-none of nvidia, nvidia_peermem, nvme}"
}

gdsv_build() {
	local log=$OUT/build.log
	say "build against $CUDA_HOME"
	make -C "$GDSBENCH_SRC" clean >/dev/null
	if ! make -C "$GDSBENCH_SRC" -j"$(nproc)" CUDA_HOME="$CUDA_HOME" >"$log" 2>&1; then
		echo "FATAL: make -C $GDSBENCH_SRC failed; last lines of $log:"
		tail -n 25 "$log" | sed 's/^/  | /'
		exit 1
	fi
	grep -E "warning|error" "$log" || true
	make -C "$GDSBENCH_SRC" info CUDA_HOME="$CUDA_HOME"
	GDS=$GDSBENCH_SRC/gdsbench
	"$GDS" --version || { echo "FATAL: no gdsbench"; exit 1; }
}

# ---- data directory: a file system on a real block device ----
pick_dir() {
	local d
	for d in "$@"; do
		[ -n "$d" ] || continue
		mkdir -p "$d" 2>/dev/null || continue
		local src fst
		src=$(findmnt -no SOURCE -T "$d" 2>/dev/null)
		fst=$(findmnt -no FSTYPE -T "$d" 2>/dev/null)
		case "$fst" in ext4|xfs) ;; *) continue ;; esac
		case "$src" in /dev/*) echo "$d"; return 0 ;; esac
	done
	return 1
}

# on_exit CMD: run CMD when the script exits, before what was already set to run then (a RAM
# medium is unmounted after the data on it is removed)
on_exit() {
	local prev
	prev=$(trap -p EXIT | sed -E "s/^trap -- '(.*)' EXIT$/\1/")
	# shellcheck disable=SC2064  # expanded now, on purpose
	trap "$1${prev:+; $prev}" EXIT
}
gdsv_remove_data() {	# the data directory this run made (gdsv_data_dir), and nothing else
	[ -n "${DATA_MADE:-}" ] && rm -rf -- "$DATA_MADE"
	DATA_MADE=""
}

gdsv_data_dir() {
	local cands tgt src fst
	say "file systems"
	df -hT 2>/dev/null | grep -vE "tmpfs|overlay|proc|sysfs" | head -20
	findmnt -rn -o TARGET,SOURCE,FSTYPE,MAJ:MIN 2>/dev/null | grep -E " /dev/" | head -20
	cands=("${1:-}" "$ROOT/bench/obj/gdsdata")
	while read -r tgt src fst; do cands+=("$tgt/gdsbench-data"); done < <(findmnt -rn -o TARGET,SOURCE,FSTYPE | awk '$2 ~ /^\/dev\// && ($3=="ext4"||$3=="xfs")')
	DATA=$(pick_dir "${cands[@]}") || { DATA=$ROOT/bench/obj/gdsdata; mkdir -p "$DATA"; echo "WARNING: no ext4/xfs on a /dev block device found; using $DATA"; }
	# the run's own scratch inside it: every $DATA/<name> of the scripts is there, and the exit
	# removes that directory alone, never a user's directory of the same name beside it
	DATA_MADE=$(mktemp -d "$DATA/gdsv-run.XXXXXX") || { echo "cannot make a scratch directory in $DATA"; return 1; }
	DATA=$DATA_MADE
	on_exit gdsv_remove_data
	echo "data directory: $DATA on $(findmnt -no SOURCE,FSTYPE,MAJ:MIN -T "$DATA")"
	df -h "$DATA" | tail -1
}

# ---- a RAM-backed drive: ext4 on a loop device over a file in /dev/shm ----
# ram_medium makes it ($RAM_MNT, $RAM_LOOP); ram_medium_remove removes only what ram_medium made
# (the callers trap it on EXIT). A drive whose own spread (1.2-3.2 GiB/s between rounds on the
# rented machines' virtio disk) is wider than the gap being measured leaves the software alone.
RAM_IMG="" RAM_LOOP="" RAM_MNT=""
ram_medium_remove() {	# what cannot go yet (a busy mount) is named and kept: a later call retries it
	if [ -n "$RAM_MNT" ]; then
		if ! umount "$RAM_MNT" && ! { sleep 2; umount "$RAM_MNT"; }; then
			echo "ram medium: $RAM_MNT is busy, left mounted: umount $RAM_MNT; losetup -d $RAM_LOOP; rm $RAM_IMG"
			return 1
		fi
		rmdir "$RAM_MNT" || echo "ram medium: $RAM_MNT unmounted, the directory left"
		RAM_MNT=""
	fi
	if [ -n "$RAM_LOOP" ]; then
		losetup -d "$RAM_LOOP" || { echo "ram medium: loop device $RAM_LOOP left (losetup -d $RAM_LOOP)"; return 1; }
		RAM_LOOP=""
	fi
	if [ -n "$RAM_IMG" ]; then
		rm -f "$RAM_IMG" && RAM_IMG=""
	fi
	return 0
}
ram_medium() {
	local img=/dev/shm/gds-parity-$$.img mnt=/mnt/gds-parity-$$
	if [ -e "$img" ] || [ -e "$mnt" ]; then
		echo "ram medium: $img or $mnt exists (not made here): not used"
		return 1
	fi
	truncate -s 10G "$img" && RAM_IMG=$img || return 1
	RAM_LOOP=$(losetup -f --show "$img") || { RAM_LOOP=""; return 1; }
	mkfs.ext4 -q -F "$RAM_LOOP" >/dev/null && mkdir "$mnt" && mount "$RAM_LOOP" "$mnt" && RAM_MNT=$mnt || return 1
	echo "ram medium: ext4 on $RAM_LOOP over $img, mounted at $mnt"
}
# drop_page_cache: write back and drop the page cache (DROP_CACHES_FILE, default the kernel's
# /proc/sys/vm/drop_caches; root only), so that the next run reads its drive, not memory
drop_page_cache() {
	sync
	echo 3 >"${DROP_CACHES_FILE:-/proc/sys/vm/drop_caches}" 2>/dev/null
}

# ---- the udev record cuFile needs ----
# cuFile registers a file only when the udev database has a record of its block
# device (/run/udev/data/b<major>:<minor>); a node without udevd has none.
# udev_record MAJ:MIN FSTYPE creates the record only when it is missing: an
# existing one (udevd's own) is never overwritten or deleted, and the output
# says which it was. UDEV_DATA overrides /run/udev/data.
udev_record() {
	local dir=${UDEV_DATA:-/run/udev/data}
	local f=$dir/b$1
	if [ -e "$f" ]; then
		echo "udev record present, left as it is (never overwritten or deleted): $f ($(tr '\n' ' ' <"$f" | cut -c1-120))"
		return 0
	fi
	mkdir -p "$dir" || return 1
	# noclobber: a record that appeared meanwhile is not overwritten either
	if ( set -o noclobber; printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$2" >"$f" ) 2>/dev/null; then
		echo "udev record CREATED (it was missing): $f (E:ID_FS_USAGE=filesystem, E:ID_FS_TYPE=$2) for block device $1"
	elif [ -e "$f" ]; then
		echo "udev record present, left as it is (it appeared meanwhile): $f"
	else
		echo "udev record: could not create $f"
		return 1
	fi
}

gdsv_udev() {
	local mm fst parent
	say "udev record for the data file system"
	mm=$(findmnt -no MAJ:MIN -T "$DATA" | tr -d ' ')
	fst=$(findmnt -no FSTYPE -T "$DATA")
	if [ -n "$mm" ]; then
		udev_record "$mm" "$fst"
		# a partition: cuFile may look the whole disk up as well
		if [ -e "/sys/dev/block/$mm/partition" ]; then
			parent=$(cat "$(dirname "$(readlink -f "/sys/dev/block/$mm")")/dev" 2>/dev/null)
			[ -n "$parent" ] && udev_record "$parent" "$fst"
		fi
	else
		echo "could not read MAJ:MIN of $DATA"
	fi
}

# ---- rows ----
row() { printf '%s\n' "$*" >>"$ROWS"; }

# ---- gdsbench runs and their verdicts ----
GDSV_FAILED=()	# "NAME (why)" of every run that did not do what it had to

gds() { gds_run must-pass "$@"; }		# gds NAME ARGS...: a run that must pass
gds_diag() {					# a diagnostic that is expected to fail
	if [ "${GDSV_DIAG:-1}" = 0 ]; then
		echo "DIAGNOSTIC (expected to fail): $1 skipped (GDSV_DIAG=0)"
		return 0
	fi
	gds_run diagnostic "$@"
}
gds_must_fail() { gds_run must-fail "$@"; }	# a run that must fail (corrupted data)

# gds_run KIND NAME ARGS...: run gdsbench with a JSON record, add a table row, judge it
gds_run() {
	local kind=$1 name=$2; shift 2
	local js=$JSONDIR/$name.json rc label=""
	[ "$kind" = diagnostic ] && label="DIAGNOSTIC (expected to fail) "
	echo "+ gdsbench $*"
	timeout -k 5 "$(( ${T%.*} + 90 ))" "$GDS" "$@" --json "$js"
	rc=$?
	python3 - "$name" "$js" "$rc" "$RECS" "$label" >>"$ROWS" <<'EOF'
import json, sys
name, path, rc, label = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[5]
try:
    j = json.load(open(path))
except Exception as e:
    print(f"{name}\tgdsbench\t-\t-\t-\t-\t-\t{label}no JSON (rc={rc})"); sys.exit()
j["test"] = name
with open(sys.argv[4], "a") as f:
    f.write(json.dumps(j) + "\n")
ev = "; ".join(e for e in j["path"]["evidence"]
              if e.startswith(("verdict", "cuFile per-GPU", "cuFile batch stats", "cuFile op counts summed")))[:200]
tool = f"gdsbench -x {j['xfer_type']}" + (f" -P {j['procs']}" if j.get("procs", 1) > 1 else "")
print(f"{name}\t{tool}\t{j['throughput_gib_s']:.3f}\t{j['iops']:.0f}\t{j['lat_us']['mean']:.1f}\t{j['lat_us']['p99']:.1f}\t{j['path']['mode']}\t{label}rc={rc} verify_errors={j['verify_errors']} {ev}")
EOF
	gdsv_judge "$kind" "$name" "$rc" "$js"
	return $rc
}

# gdsv_outcome RC JSON: "rc=1, errors=0, verify_errors=50560, error: ..." from the run's record
gdsv_outcome() {
	python3 - "$1" "$2" <<'EOF'
import json, sys
rc, path = sys.argv[1], sys.argv[2]
parts = ["rc=%s" % rc]
try:
    j = json.load(open(path))
    parts += ["errors=%s" % j.get("errors"), "verify_errors=%s" % j.get("verify_errors")]
    if j.get("error"):
        parts.append("error: %s" % j["error"][:200])
except Exception:
    parts.append("no JSON record")
print(", ".join(parts))
EOF
}

# gdsv_judge KIND NAME RC JSON: one labelled line; a run that did not do what its
# kind requires goes to GDSV_FAILED (diagnostics never do).
gdsv_judge() {
	local kind=$1 name=$2 rc=$3 why
	why=$(gdsv_outcome "$rc" "$4")
	case "$kind:$rc" in
	must-pass:0) ;;
	must-pass:*) echo "FAILED: $name ($why)"; GDSV_FAILED+=("$name ($why)") ;;
	diagnostic:0) echo "DIAGNOSTIC (expected to fail): $name passed this time ($why)" ;;
	diagnostic:*) echo "DIAGNOSTIC (expected to fail): $name failed, as known ($why)" ;;
	must-fail:0) echo "FAILED: $name passed but had to fail"; GDSV_FAILED+=("$name (passed but had to fail)") ;;
	must-fail:*) echo "ok: $name failed as it had to ($why)" ;;
	esac
}

# gdsv_verdict SCRIPT: the last lines of a script's output; returns 1 when a run failed.
gdsv_verdict() {
	if [ "${#GDSV_FAILED[@]}" -gt 0 ]; then
		echo "$1: FAILED: ${#GDSV_FAILED[@]} run(s) did not do what they had to:"
		printf '  %s\n' "${GDSV_FAILED[@]}"
		return 1
	fi
	echo "$1: OK: every run that had to pass passed (diagnostics are labelled DIAGNOSTIC above)"
	return 0
}

fio_row() {
	local name=$1 js=$2 rc=$3
	python3 - "$name" "$js" "$rc" "$RECS" >>"$ROWS" <<'EOF'
import json, sys
name, path, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    txt = open(path).read()
    j = json.loads(txt[txt.index("{"):])
    with open(sys.argv[4], "a") as f:
        f.write(json.dumps({"test": name, "fio": j["jobs"][0]}) + "\n")
    jb = j["jobs"][0]
    r = jb["read"] if jb["read"]["io_bytes"] else jb["write"]
    p99 = r["clat_ns"]["percentile"].get("99.000000", 0) / 1000
    print(f"{name}\tfio {jb['job options'].get('ioengine','')}\t{r['bw_bytes']/2**30:.3f}\t{r['iops']:.0f}\t{r['lat_ns']['mean']/1000:.1f}\t{p99:.1f}\t-\trc={rc}")
except Exception as e:
    print(f"{name}\tfio\t-\t-\t-\t-\t-\tfailed rc={rc} ({e})")
EOF
}

# fio with its libcufile engine: the carried binary, else built from the carried source
gdsv_find_fio() {
	local carried=$ROOT/.peers/carry/fio-cufile src
	FIO=""
	if [ -x "$carried" ]; then
		if "$carried" --version >/dev/null 2>"$OUT/fio-carried.err"; then
			FIO=$carried
		else
			echo "fio: the carried $carried does not start here: $(head -c 300 "$OUT/fio-carried.err")"
		fi
	else
		echo "fio: no carried binary ($carried)"
	fi
	if [ -z "$FIO" ]; then
		src=$(find "$ROOT/.peers/carry" -maxdepth 1 -name 'fio_*.orig.tar.gz' 2>/dev/null | sort | tail -1)
		if [ -z "$src" ]; then
			echo "fio: no carried source (.peers/carry/fio_*.orig.tar.gz): no fio rows"
		elif FIO_BUILD=$(mktemp -d /tmp/fio-build.XXXXXX) && fio_build "$src" "$FIO_BUILD" "$OUT/fio-build.log"; then
			FIO=$FIO_BUILD/fio
		fi
	fi
	echo "fio: ${FIO:-not available}${FIO:+ ($("$FIO" --version))}"
}

# fio_build_start: fio's build from the carried source (.peers/carry/fio_*.orig.tar.gz) in the
# background (FIO_BG) while the caller builds gdsbench; 1 when no source is carried
fio_build_start() {
	local src
	src=$(find "$ROOT/.peers/carry" -maxdepth 1 -name 'fio_*.orig.tar.gz' 2>/dev/null | sort | tail -1)
	[ -n "$src" ] || return 1
	FIO_BUILD=$(mktemp -d /tmp/fio-build.XXXXXX) || return 1
	fio_build "$src" "$FIO_BUILD" "$OUT/fio-build.log" >"$OUT/fio-build.out" 2>&1 &
	FIO_BG=$!
}

# fio_build_wait: the end of that build (its output); FIO=$FIO_BUILD/fio when it built
fio_build_wait() {
	[ -n "${FIO_BG:-}" ] || return 0
	if wait "$FIO_BG"; then FIO=$FIO_BUILD/fio; fi
	cat "$OUT/fio-build.out"
	FIO_BG=""
}

# fio_build SRC.tar.gz DIR LOG: fio with --enable-libcufile against $CUDA_HOME, in DIR (the
# callers' is theirs, made with mktemp; never emptied here). Every step writes to LOG; a failure
# names the step and prints the log's last lines.
fio_build() {
	local src=$1 b=$2 log=$3 step
	echo "fio: building with libcufile from $(basename "$src") in $b (log: $log)"
	if ! { mkdir -p "$b" && : >"$log"; }; then
		echo "fio: build FAILED: cannot prepare $b or $log"
		return 1
	fi
	step="unpack: tar -xzf $src"
	if tar -xzf "$src" -C "$b" --strip-components=1 >>"$log" 2>&1; then
		# fio 3.33's configure takes LDFLAGS from the environment (no --extra-ldflags)
		step="./configure --enable-libcufile --extra-cflags=-I$CUDA_HOME/include"
		if (cd "$b" && LDFLAGS="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64" \
			./configure --enable-libcufile --disable-native --extra-cflags="-I$CUDA_HOME/include") >>"$log" 2>&1; then
			step="./configure: libcufile not enabled (cufile.h or libcufile not found under $CUDA_HOME)"
			if grep -q "CONFIG_LIBCUFILE" "$b/config-host.h" 2>/dev/null; then
				step="make -j$(nproc)"
				if (cd "$b" && make -j"$(nproc)") >>"$log" 2>&1; then
					[ -x "$b/fio" ] && return 0
					step="make: no fio binary was produced"
				fi
			fi
		fi
	fi
	echo "fio: build FAILED at step: $step"
	echo "fio: last lines of $log:"
	tail -n 25 "$log" | sed 's/^/  | /'
	return 1
}

# round_gds ROUND WORKLOAD TOOL GDSBENCH-ARGS...: a gdsbench run that must pass (gds), recorded in
# $RUNS by side_by_side.py (the caller sets RUNS, and SBS to run side_by_side.py)
round_gds() {
	local r=$1 wl=$2 tool=$3 rc; shift 3
	gds "$wl-$tool-r$r" "$@"
	rc=$?
	$SBS record "$RUNS" "$r" "$wl" "$tool" gdsbench "$JSONDIR/$wl-$tool-r$r.json" "$rc" gdsbench "$@"
}

# round_fio ROUND WORKLOAD TOOL FIO-ARGS...: a timed fio run ($T s, 90 s more at most), recorded in
# $RUNS; nothing without $FIO. FIO_MUST_PASS=1: a failed run fails the script like a gdsbench one.
round_fio() {
	local r=$1 wl=$2 tool=$3 js rc; shift 3
	js=$JSONDIR/fio-$wl-$tool-r$r.json
	[ -n "$FIO" ] || return 0
	echo "+ fio $wl $tool $*"
	timeout -k 5 "$(( ${T%.*} + 90 ))" "$FIO" --name="$wl" --direct=1 --time_based --runtime="$T" --group_reporting \
		--output-format=json "$@" >"$js" 2>"$js.err"
	rc=$?
	if [ "$rc" != 0 ]; then
		echo "fio $wl $tool r$r: rc=$rc: $(head -c 600 "$js.err")"
		[ "${FIO_MUST_PASS:-0}" = 1 ] && GDSV_FAILED+=("fio $wl $tool r$r (rc=$rc)")
	fi
	$SBS record "$RUNS" "$r" "$wl" "$tool" fio "$js" "$rc" fio "$@"
}

gdsv_table() {
	say "results (GiB/s, IOPS, latency in us; path = gdsbench path.mode)"
	{
		printf '%-24s %-22s %9s %9s %9s %9s %-7s %s\n' test tool GiB/s IOPS avg_us p99_us path note
		while IFS=$'\t' read -r n tool g i a p m note; do
			printf '%-24s %-22s %9s %9s %9s %9s %-7s %s\n' "$n" "$tool" "$g" "$i" "$a" "$p" "$m" "$note"
		done <"$ROWS"
	} | tee "$OUT/table.txt"
}


# fio_seq NAME ENGINE-ARGS...: fio on 1 MiB sequential reads of the 8 files in $DATA/big by 8
# jobs (one file per job, like gdsbench -D), as a peer row; gpu_validate.sh and gpu_procs.sh.
fio_seq() {
	local name=$1; shift
	[ -n "$FIO" ] || return 0
	echo "+ fio $name $*"
	timeout -k 5 "$(( ${T%.*} + 90 ))" "$FIO" --name="$name" --filename_format="$DATA/big/gdsbench.\$jobnum" --size="$BIG" --bs=1M --rw=read \
		--numjobs=8 --direct=1 --time_based --runtime="$T" --group_reporting --output-format=json \
		"$@" >"$JSONDIR/$name.json" 2>"$JSONDIR/$name.err"
	fio_row "$name" "$JSONDIR/$name.json" $?
	cat "$JSONDIR/$name.err"
}

# fio's libcufile engine (or psync) on 4 KiB random reads of $F0 by 32 jobs, as a peer row.
fio_rand() {
	local name=$1; shift
	[ -n "$FIO" ] || return 0
	echo "+ fio $name $*"
	timeout -k 5 "$(( ${T%.*} + 90 ))" "$FIO" --name="$name" --filename="$F0" --size="$BIG" --bs=4k --rw=randread --numjobs=32 --direct=1 \
		--time_based --runtime="$T" --group_reporting --output-format=json --randrepeat=0 \
		"$@" >"$JSONDIR/$name.json" 2>"$JSONDIR/$name.err"
	fio_row "$name" "$JSONDIR/$name.json" $?
	cat "$JSONDIR/$name.err"
}

# KvikIO's own benchmark as a cuFile peer, when its wheels are carried in .whl/ (8 threads);
# one table row per read/write line it prints. Args: API (cufile-mfma) BYTES (8GiB) TIMEOUT_S.
# scripts/carry-wheels.sh installs the kvikio group and names any wheel that is missing.
gdsv_kvikio() {
	local api=${1:-cufile-mfma} bytes=${2:-8GiB} limit=${3:-150}
	if ! ls "$ROOT"/.whl/*kvikio*.whl >/dev/null 2>&1; then
		echo "KvikIO: not carried (no kvikio wheels in $ROOT/.whl; make wheels): no KvikIO rows"
		return 0
	fi
	say "KvikIO single_node_io ($api through libcufile; $bytes, 8 threads)"
	"$ROOT/scripts/carry-wheels.sh" install kvikio /tmp/kvsite \
		&& mkdir -p "$DATA/kvikio" \
		&& KVIKIO_COMPAT_MODE=${GDSV_KVIKIO_COMPAT:-OFF} PYTHONPATH=/tmp/kvsite timeout "$limit" \
			python3 -m kvikio.benchmarks.single_node_io -n "$bytes" -t 8 -d "$DATA/kvikio" --api "$api" --nruns 1 2>&1 \
			| tee "$OUT/kvikio.txt" \
		&& python3 - "$OUT/kvikio.txt" >>"$ROWS" <<'PY'
import re, sys
for line in open(sys.argv[1]):
    m = re.match(r"\s*(\S+)\s+(read|write)\s*\|\s*([\d.]+)\s*(\w+)/s", line)
    if m:
        api, op, v, unit = m.groups()
        mult = {"GiB": 1, "MiB": 1/1024, "TiB": 1024, "KiB": 1/2**20}.get(unit, float("nan"))
        print(f"kvikio-{api}-{op}\tkvikio {api}\t{float(v)*mult:.3f}\t-\t-\t-\t-\t{line.strip()[:100]}")
PY
	rm -rf "$DATA/kvikio"
}
