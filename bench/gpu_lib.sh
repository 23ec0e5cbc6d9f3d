# shellcheck shell=bash
# Sourced (not run) by bench/gpu_validate.sh and bench/gpu_procs.sh: the steps
# every GPU measurement shares. The caller sets HERE ROOT OUT T BIG GPU
# CUDA_HOME first; gdsv_init sets up the rest (JSONDIR, ROWS, RECS, the log).
#
#   gdsv_init             result files under $OUT, log to $OUT/log.txt
#   gdsv_environment      machine, driver, GDS, nvidia-fs, cufile.json
#   gdsv_build            bench/gdsbench against $CUDA_HOME -> $GDS
#   gdsv_data_dir [DIR]   a directory on ext4/xfs on a /dev block device -> $DATA
#   gdsv_udev             the udev record cuFile needs for $DATA's block device
#   gdsv_find_fio         fio with the libcufile engine (.peers/carry) -> $FIO
#   gds NAME ARGS...      one gdsbench run with a JSON record and a table row
#   fio_row NAME JSON RC  a table row from fio's JSON output
#   gdsv_table            the rows as one table ($OUT/table.txt)

say() { printf '\n== %s\n' "$*"; }

gdsv_init() {
	JSONDIR=$(mktemp -d /tmp/gdsv-json.XXXXXX)	# every record also goes to $RECS
	mkdir -p "$OUT"
	LOG=$OUT/log.txt
	ROWS=$OUT/rows.tsv
	RECS=$OUT/records.jsonl
	: >"$ROWS"; : >"$RECS"
	exec > >(tee -a "$LOG") 2>&1
}

gdsv_environment() {
	say "environment ($(date -u +%FT%TZ))"
	uname -a
	nvidia-smi --query-gpu=name,driver_version,pci.bus_id,memory.total --format=csv,noheader 2>&1 | head -4
	nproc; free -g | head -2
	ls "$CUDA_HOME"/lib64/libcufile.so* 2>&1 | head -3
	grep -m1 -i "version" "$CUDA_HOME"/gds/README 2>/dev/null || true
	ls /proc/driver/nvidia-fs 2>&1 | head -2
	lsmod 2>/dev/null | grep -E "nvidia_fs|nvme" || echo "(no nvidia_fs / nvme modules listed)"
	ls -la /etc/cufile.json 2>&1
	# the settings that shape compat mode (threads, queue, bounce pools)
	grep -E '"(max_io_threads|max_io_queue_depth|parallel_io|max_request_parallelism|min_io_threshold_size_kb|max_device_cache_size_kb|per_buffer_cache_size_kb|allow_compat_mode|posix_pool_slab_size_kb|posix_pool_slab_count|use_poll_mode)"' \
		/etc/cufile.json 2>/dev/null | sed -e 's/^[[:space:]]*/  cufile.json: /' || true
}

gdsv_build() {
	say "build against $CUDA_HOME"
	make -C "$HERE" clean >/dev/null
	if ! make -C "$HERE" -j"$(nproc)" CUDA_HOME="$CUDA_HOME" 2>&1 | grep -E "warning|error|gdsbench$" ; then :; fi
	make -C "$HERE" info CUDA_HOME="$CUDA_HOME"
	GDS=$HERE/gdsbench
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

gdsv_data_dir() {
	local cands tgt src fst
	say "file systems"
	df -hT 2>/dev/null | grep -vE "tmpfs|overlay|proc|sysfs" | head -20
	findmnt -rn -o TARGET,SOURCE,FSTYPE,MAJ:MIN 2>/dev/null | grep -E " /dev/" | head -20
	cands=("${1:-}" "$ROOT/bench/obj/gdsdata")
	while read -r tgt src fst; do cands+=("$tgt/gdsbench-data"); done < <(findmnt -rn -o TARGET,SOURCE,FSTYPE | awk '$2 ~ /^\/dev\// && ($3=="ext4"||$3=="xfs")')
	DATA=$(pick_dir "${cands[@]}") || { DATA=$ROOT/bench/obj/gdsdata; mkdir -p "$DATA"; echo "WARNING: no ext4/xfs on a /dev block device found; using $DATA"; }
	echo "data directory: $DATA on $(findmnt -no SOURCE,FSTYPE,MAJ:MIN -T "$DATA")"
	df -h "$DATA" | tail -1
}

# ---- the udev record cuFile needs (docs/testing.md, the GPU machine) ----
udev_entry() {
	local f=/run/udev/data/b$1
	if [ -e "$f" ]; then
		echo "present: $f ($(tr '\n' ' ' <"$f" | cut -c1-120))"
	else
		mkdir -p /run/udev/data
		printf 'E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=%s\n' "$2" >"$f" && echo "CREATED: $f (E:ID_FS_USAGE=filesystem, E:ID_FS_TYPE=$2) for block device $1"
	fi
}

gdsv_udev() {
	local mm fst parent
	say "udev record for the data file system"
	mm=$(findmnt -no MAJ:MIN -T "$DATA" | tr -d ' ')
	fst=$(findmnt -no FSTYPE -T "$DATA")
	if [ -n "$mm" ]; then
		udev_entry "$mm" "$fst"
		# a partition: cuFile may look the whole disk up as well
		if [ -e "/sys/dev/block/$mm/partition" ]; then
			parent=$(cat "$(dirname "$(readlink -f "/sys/dev/block/$mm")")/dev" 2>/dev/null)
			[ -n "$parent" ] && udev_entry "$parent" "$fst"
		fi
	else
		echo "could not read MAJ:MIN of $DATA"
	fi
}

# ---- rows ----
row() { printf '%s\n' "$*" >>"$ROWS"; }

# gds NAME args... : run gdsbench with a JSON record, add a table row
gds() {
	local name=$1; shift
	local js=$JSONDIR/$name.json rc
	echo "+ gdsbench $*"
	timeout -k 5 "$(( ${T%.*} + 90 ))" "$GDS" "$@" --json "$js"
	rc=$?
	python3 - "$name" "$js" "$rc" "$RECS" >>"$ROWS" <<'EOF'
import json, sys
name, path, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    j = json.load(open(path))
except Exception as e:
    print(f"{name}\tgdsbench\t-\t-\t-\t-\t-\tno JSON (rc={rc})"); sys.exit()
j["test"] = name
with open(sys.argv[4], "a") as f:
    f.write(json.dumps(j) + "\n")
ev = "; ".join(e for e in j["path"]["evidence"]
              if e.startswith(("verdict", "cuFile per-GPU", "cuFile batch stats", "cuFile op counts summed")))[:200]
tool = f"gdsbench -x {j['xfer_type']}" + (f" -P {j['procs']}" if j.get("procs", 1) > 1 else "")
print(f"{name}\t{tool}\t{j['throughput_gib_s']:.3f}\t{j['iops']:.0f}\t{j['lat_us']['mean']:.1f}\t{j['lat_us']['p99']:.1f}\t{j['path']['mode']}\trc={rc} verify_errors={j['verify_errors']} {ev}")
EOF
	return $rc
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
	FIO=""
	if [ -x "$ROOT/.peers/carry/fio-cufile" ] && "$ROOT/.peers/carry/fio-cufile" --version >/dev/null 2>&1; then
		FIO=$ROOT/.peers/carry/fio-cufile
	elif ls "$ROOT"/.peers/carry/fio_*.orig.tar.gz >/dev/null 2>&1; then
		echo "building fio with libcufile (the carried binary does not start here)"
		local b=/tmp/fio-build
		rm -rf $b; mkdir -p $b
		tar -xzf "$ROOT"/.peers/carry/fio_*.orig.tar.gz -C $b --strip-components=1
		# fio 3.33's configure takes LDFLAGS from the environment (no --extra-ldflags)
		( cd $b && export LDFLAGS="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64" && \
		  ./configure --enable-libcufile --disable-native --extra-cflags="-I$CUDA_HOME/include" >/dev/null && \
		  make -j"$(nproc)" >/dev/null 2>&1 ) && FIO=$b/fio
	fi
	echo "fio: ${FIO:-not available}${FIO:+ ($("$FIO" --version))}"
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
gdsv_kvikio() {
	local api=${1:-cufile-mfma} bytes=${2:-8GiB} limit=${3:-150}
	ls "$ROOT"/.whl/kvikio*.whl >/dev/null 2>&1 || return 0
	say "KvikIO single_node_io ($api through libcufile; $bytes, 8 threads)"
	local whl
	whl=$(ls "$ROOT"/.whl/*kvikio*.whl "$ROOT"/.whl/rapids_logger*.whl "$ROOT"/.whl/dask-*.whl \
		"$ROOT"/.whl/partd-*.whl "$ROOT"/.whl/locket-*.whl 2>/dev/null)
	# shellcheck disable=SC2086
	python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/kvsite $whl \
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
