#!/usr/bin/env bash
# GPU 0's PCIe link and memory health as the gds_bench module sees them (plugins/module_utils/measure/devhealth,
# the same NVML sampler), printed next to nvidia-smi's own view:
#   1. NVML idle: current/max link generation and width, clock event reasons (a few samples);
#   2. NVML under load: gdsbench -x 0 (cuFile reads on GPU 0) runs for $SECS seconds while the
#      sampler runs every 0.5 s; the max generation/width seen, the reasons seen, and
#      nvidia-smi's link query taken mid-run;
#   3. ECC, retired pages, remapped rows (NVML), and the health checks the module would record
#      (`pcie: link <bdf> under load`, `gpu: health 0`, `pcie: aer <bdf>` when the topology
#      gives pcie_links);
#   4. nvidia-smi's link query and -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER,PERFORMANCE idle, for
#      comparison (PCIe is no -d section: the link comes from --query-gpu pcie.link.*).
# Read-only apart from the benchmark's data files (removed at the end). Needs pynvml
# (nvidia-ml-py) and CUDA (gdsbench is built with $CUDA_HOME in the gds_bench role's files/bench when it is missing there).
#   scripts/gpu-health.sh [DATA_DIR]        (SECS=10 OUT=build/gpu-health by default)
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/build/gpu-health}
SECS=${SECS:-10}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$OUT"
say() { printf '\n==== %s\n' "$*"; }

GDSBENCH_SRC=$ROOT/collections/ansible_collections/gds/commission/roles/gds_bench/files/bench
GDS=$GDSBENCH_SRC/gdsbench
if [ ! -x "$GDS" ]; then
	say "build gdsbench against $CUDA_HOME"
	make -C "$GDSBENCH_SRC" -j"$(nproc)" CUDA_HOME="$CUDA_HOME" >"$OUT/build.log" 2>&1 || { tail -n 20 "$OUT/build.log"; exit 1; }
fi

DATA=${1:-}
if [ -z "$DATA" ]; then
	mnt=$(findmnt -rn -o TARGET,SOURCE,FSTYPE | awk '$2 ~ /^\/dev\// && ($3=="ext4"||$3=="xfs") {print $1; exit}')
	DATA=${mnt%/}/gds-health
fi
mkdir -p "$DATA" && RUN=$(mktemp -d "$DATA/gds-health.XXXXXX") || exit 1
say "data directory $DATA on $(findmnt -no SOURCE,FSTYPE -T "$DATA")"

LINKQ=pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max
say "nvidia-smi: link (idle) and -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER,PERFORMANCE"
{ nvidia-smi -i 0 --query-gpu=$LINKQ --format=csv
  nvidia-smi -q -i 0 -d ECC,PAGE_RETIREMENT,ROW_REMAPPER,PERFORMANCE; } 2>&1 | tee "$OUT/nvidia-smi-idle.txt"

say "write the files the read job uses"
"$GDS" -D "$RUN" -x 0 -I 1 -w 4 -s 256M -i 1M -d 0 >"$OUT/write.txt" 2>&1 || { cat "$OUT/write.txt"; exit 1; }
tail -n 1 "$OUT/write.txt"

# nvidia-smi's own view of the link while the read job runs
( sleep $((SECS / 2)); { nvidia-smi -i 0 --query-gpu=$LINKQ --format=csv
  nvidia-smi -q -i 0 -d PERFORMANCE; } >"$OUT/nvidia-smi-load.txt" 2>&1 ) &
smi=$!

say "NVML through plugins/module_utils/measure/devhealth: idle, then under gdsbench -x 0 for ${SECS}s"
python3 - "$ROOT" "$GDS" "$RUN" "$SECS" "$OUT" <<'PY'
import json, os, subprocess, sys, time, types
root, gds, data, secs, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, os.path.join(root, "collections"))  # the collection's module_utils, as on a node
import pynvml
from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import (HealthRun, NvmlSampler, gpu_memory_health, nvml_value,
                                                reason_names, CURR_GEN, CURR_WIDTH, MAX_GEN, MAX_WIDTH,
                                                GPU_MAX_GEN, GPU_MAX_WIDTH, CLOCK_EVENTS)

def now(handle):
    vals = {}
    for key, names in (("curr_gen", CURR_GEN), ("curr_width", CURR_WIDTH), ("max_gen", MAX_GEN),
                       ("max_width", MAX_WIDTH), ("gpu_max_gen", GPU_MAX_GEN), ("gpu_max_width", GPU_MAX_WIDTH),
                       ("clock_events", CLOCK_EVENTS)):
        value, why = nvml_value(pynvml, names, handle)
        vals[key] = reason_names(value) if key == "clock_events" and value is not None else (value if why is None else "unknown (%s)" % why)
    return vals

pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(0)
print("GPU 0:", pynvml.nvmlDeviceGetName(handle), pynvml.nvmlDeviceGetPciInfo(handle).busId)
print("idle, now:", json.dumps(now(handle)))
idle = NvmlSampler(pynvml, [0], interval=0.5)
idle.start()
time.sleep(2)
idle.stop()
print("idle, 2 s sampled:", json.dumps(idle.gpu_load()), "clock events:", reason_names(idle.gpus[0].reasons))

links, drives = [], []
try:
    from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
    topo = discover("/sys", "/proc")[0]
    links = topo.get("pcie_links") or []
    drives = sorted({c for d in topo.get("nvme", []) if not d.get("system") for c in d.get("controllers", [])})
except Exception as exc:
    print("no topology (%s): link and AER checks from NVML only" % exc)
bdf0 = idle.gpus[0].bdf
for link in links:  # sysfs's view of GPU 0's link, both ends
    if link["bdf"] == bdf0 or any(l["bdf"] == bdf0 and l.get("upstream") == link["bdf"] for l in links):
        print("sysfs (idle):", json.dumps(link))
print("data drives read with nvme smart-log:", drives or "none")
health = HealthRun(links, sysfs_root="/sys", nvme_devices=drives, gpu_indices=[0], interval=0.5)
health.begin()
cmd = [gds, "-D", data, "-x", "0", "-I", "0", "-w", "4", "-s", "256M", "-i", "1M", "-d", "0", "-T", str(secs)]
env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
time.sleep(secs / 2.0)
print("under load, now:", json.dumps(now(handle)))
text = proc.communicate()[0].decode("utf-8", "replace")
health.end()
print("gdsbench exit %d: %s" % (proc.returncode, [l for l in text.splitlines() if l.startswith("IoType")][:1]))
print("under load, sampled:", json.dumps(health.gpu_load()))
facts = health.facts()
print("GPU memory health (NVML):", json.dumps(facts["gpus"], indent=1))
print("checks the module would record:")
for c in health.checks():
    print("  %-45s %-5s expected=%s actual=%s%s" % (c["name"], c["verdict"], c["expected"], c["actual"],
                                                   " (%s)" % c["detail"] if c.get("detail") else ""))
json.dump({"facts": facts, "checks": health.checks()}, open(os.path.join(out, "health.json"), "w"), indent=1)
pynvml.nvmlShutdown()
PY
rc=$?
wait "$smi"
say "nvidia-smi: link and -q -d PERFORMANCE mid-run"
cat "$OUT/nvidia-smi-load.txt"
rm -rf "$RUN"
exit $rc
