#!/usr/bin/env bash
# gdsbench's CPU path (-x 1, O_DIRECT pread) against fio (--ioengine=psync
# --direct=1) on the same files, same thread count, block size and duration,
# in alternating runs (the order flips every round, so drift hits both).
#
#   bench/compare_fio.sh [DIR]      (default: bench/obj/fio-compare)
#
# Environment: THREADS (default 4), SIZE per file (1G), T seconds per run (10),
# ROUNDS (3), RAND_THREADS (THREADS), STRICT=1 to exit 1 when a criterion is
# missed. Criteria: throughput and IOPS ratio gdsbench/fio >= 1.0,
# average latency within 5 % of fio's. Results: a table on stdout and
# $DIR/compare.json (medians and every run).
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -eu -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DIR=${1:-$HERE/obj/fio-compare}
THREADS=${THREADS:-4}
RAND_THREADS=${RAND_THREADS:-$THREADS}
SIZE=${SIZE:-1G}
T=${T:-10}
ROUNDS=${ROUNDS:-3}
GDSBENCH_SRC=$(cd "$HERE/../collections/ansible_collections/gds/commission/roles/gds_bench/files/bench" && pwd)
GDS=$GDSBENCH_SRC/gdsbench
FIO=${FIO:-fio}

command -v "$FIO" >/dev/null || { echo "compare_fio: fio not found (apt-get install fio)" >&2; exit 1; }
[ -x "$GDS" ] || make -C "$GDSBENCH_SRC" -s
mkdir -p "$DIR"
RUNS=$DIR/runs.jsonl
: >"$RUNS"
# CPU seconds per run from the tools' own rusage (their cpu% fields differ in meaning)
TIMER=()
[ -x /usr/bin/time ] && TIMER=(/usr/bin/time -f "%U %S" -o "$DIR/cpu.txt")

echo "compare_fio: $("$FIO" --version), $("$GDS" --version | head -1)"
echo "target: $DIR on $(findmnt -no SOURCE,FSTYPE -T "$DIR" 2>/dev/null | tr -s ' ')"
echo "files: $THREADS x $SIZE (gdsbench.N, one per thread), $T s per run, $ROUNDS rounds, alternating"

# One file per thread, written once by gdsbench (O_DIRECT), read by both tools.
need=0
for ((i = 0; i < THREADS || i < RAND_THREADS; i++)); do [ -f "$DIR/gdsbench.$i" ] || need=1; done
if [ $need = 1 ]; then
	n=$(( THREADS > RAND_THREADS ? THREADS : RAND_THREADS ))
	"$GDS" -D "$DIR" -x 1 -I 1 -w "$n" -s "$SIZE" -i 1M >/dev/null
fi
sync

gds_run() {	# name io_type bs threads
	local out=$DIR/last.json
	echo "0 0" >"$DIR/cpu.txt"
	"${TIMER[@]}" "$GDS" -D "$DIR" -x 1 -I "$2" -i "$3" -w "$4" -T "$T" -s "$SIZE" --json "$out" >/dev/null
	python3 - "$1" gdsbench "$out" "$DIR/cpu.txt" >>"$RUNS" <<'EOF'
import json, sys
j = json.load(open(sys.argv[3]))
cpu = sum(map(float, open(sys.argv[4]).read().split()[:2]))
print(json.dumps({"test": sys.argv[1], "tool": sys.argv[2], "gib_s": j["throughput_gib_s"], "iops": j["iops"],
                  "lat_us": j["lat_us"]["mean"], "p99_us": j["lat_us"]["p99"],
                  "cpu_us_op": cpu / max(j["ops"], 1) * 1e6}))
EOF
}

fio_run() {	# name rw bs threads
	local out=$DIR/last-fio.json
	echo "0 0" >"$DIR/cpu.txt"
	"${TIMER[@]}" "$FIO" --name="$1" --ioengine=psync --direct=1 --rw="$2" --bs="$3" --numjobs="$4" --size="$SIZE" \
		--filename_format="$DIR/gdsbench.\$jobnum" --time_based --runtime="$T" --group_reporting \
		--randrepeat=0 --output-format=json >"$out"
	python3 - "$1" fio "$out" "$DIR/cpu.txt" >>"$RUNS" <<'EOF'
import json, sys
j = json.load(open(sys.argv[3]))["jobs"][0]
r = j["read"]
cpu = sum(map(float, open(sys.argv[4]).read().split()[:2]))
print(json.dumps({"test": sys.argv[1], "tool": sys.argv[2], "gib_s": r["bw_bytes"] / 2**30, "iops": r["iops"],
                  "lat_us": r["lat_ns"]["mean"] / 1000, "p99_us": r["clat_ns"]["percentile"]["99.000000"] / 1000,
                  "cpu_us_op": cpu / max(r["total_ios"], 1) * 1e6}))
EOF
}

for ((r = 1; r <= ROUNDS; r++)); do
	echo "round $r/$ROUNDS"
	if (( r % 2 )); then
		gds_run seq 0 1M "$THREADS"; fio_run seq read 1M "$THREADS"
		gds_run rand 2 4K "$RAND_THREADS"; fio_run rand randread 4k "$RAND_THREADS"
	else
		fio_run seq read 1M "$THREADS"; gds_run seq 0 1M "$THREADS"
		fio_run rand randread 4k "$RAND_THREADS"; gds_run rand 2 4K "$RAND_THREADS"
	fi
done

python3 - "$RUNS" "$DIR/compare.json" "${STRICT:-0}" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
med = lambda t, tool, k: statistics.median(r[k] for r in runs if r["test"] == t and r["tool"] == tool)
out, ok = {"runs": runs, "tests": {}}, True
print("%-5s %-9s %10s %10s %10s %10s %10s" % ("test", "tool", "GiB/s", "IOPS", "avg_us", "p99_us", "cpu_us/op"))
for t in ("seq", "rand"):
    row = {}
    for tool in ("gdsbench", "fio"):
        row[tool] = {k: med(t, tool, k) for k in ("gib_s", "iops", "lat_us", "p99_us", "cpu_us_op")}
        v = row[tool]
        print("%-5s %-9s %10.3f %10.0f %10.1f %10.1f %10.1f" % (t, tool, v["gib_s"], v["iops"], v["lat_us"], v["p99_us"], v["cpu_us_op"]))
    g, f = row["gdsbench"], row["fio"]
    row["ratio_throughput"] = g["gib_s"] / f["gib_s"]
    row["ratio_iops"] = g["iops"] / f["iops"]
    row["latency_vs_fio"] = g["lat_us"] / f["lat_us"]
    # paired per-round ratios show the spread behind the medians
    pairs = list(zip([r for r in runs if r["test"] == t and r["tool"] == "gdsbench"],
                     [r for r in runs if r["test"] == t and r["tool"] == "fio"]))
    row["round_ratios_iops"] = [round(a["iops"] / b["iops"], 3) for a, b in pairs]
    verdict = row["ratio_iops"] >= 1.0 and row["latency_vs_fio"] <= 1.05
    ok &= verdict
    print("%-5s ratio gdsbench/fio: throughput %.3f, IOPS %.3f (rounds %s), avg latency %.3f x fio -> %s"
          % (t, row["ratio_throughput"], row["ratio_iops"], row["round_ratios_iops"], row["latency_vs_fio"],
             "PASS" if verdict else "MISS"))
    out["tests"][t] = row
json.dump(out, open(sys.argv[2], "w"), indent=1)
sys.exit(1 if (sys.argv[3] == "1" and not ok) else 0)
EOF
