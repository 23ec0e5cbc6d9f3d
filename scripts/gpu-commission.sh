#!/usr/bin/env bash
# Commission the GPU machine this runs on, against itself (connection local, inventory/gpu-local):
#   0. a capture of the machine's sysfs/procfs and NVML's view of its GPUs (scripts/capture-node.py),
#      a fixture for the tests;
#   1. GPU facts: gds_topology and gds_platform against nvidia-smi (each GPU's index and address,
#      every cell of `topo -mp` and `topo -m`, NVLinks included, hw/smi_topo.py);
#   2. commission with the udev record of the data file system missing (the preflight finding),
#      only when the record is absent on this machine: an existing record (udevd's) is never
#      deleted or overwritten, and the step says it was skipped;
#   3. commission with the record present (created only when it was missing; profile
#      gpu_compat: compat path expected, can PASS);
#   4. benchmark + report again with a profile that expects nvidia-fs (FAILs, with the evidence);
#   5. tune again: changed=0; 6. the drift playbook: nothing drifted.
# ansible-core and the collections come carried in .whl/ when the machine has no package index:
# make them with `make wheels` (scripts/carry-wheels.sh); a missing wheel is named.
# Outputs go to $OUT (default build/gpu-commission). UDEV_DATA overrides /run/udev/data.
# Every step checks its own outcome (a run that must PASS, one that must FAIL with its evidence);
# the script names each step that did not come out as expected and exits 1 when there is one.
#   scripts/gpu-commission.sh [DATA_DIR]
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
OUT=${OUT:-$ROOT/build/gpu-commission}
mkdir -p "$OUT"
# shellcheck source-path=SCRIPTDIR source=../bench/gpu_lib.sh
. "$ROOT/bench/gpu_lib.sh"	# udev_record
say() { printf '\n==== %s\n' "$*"; }
FAILED=()
failed() { FAILED+=("$1"); echo "STEP FAILED: $1"; }
# GPU_COMMISSION_STEPS: the steps to run (default all, 0-6), e.g. "0 1 2 3" then "4 5 6" in two calls;
# GPU_COMMISSION_DURATION: seconds a job of step 3 runs (default: the profile's)
want() { [[ " ${GPU_COMMISSION_STEPS:-0 1 2 3 4 5 6} " == *" $1 "* ]]; }

if ! command -v ansible-playbook >/dev/null 2>&1; then
	echo "ansible-playbook not found: installing the carried wheels from .whl/"
	scripts/carry-wheels.sh install ansible /tmp/gds-site || exit 1
	scripts/carry-wheels.sh install collections /tmp/gds-collections || exit 1
	export PYTHONPATH=/tmp/gds-site${PYTHONPATH:+:$PYTHONPATH} PATH=/tmp/gds-site/bin:$PATH
	export ANSIBLE_COLLECTIONS_PATH=$ROOT/collections:/tmp/gds-collections
elif [ -f .whl/collections.tgz ]; then
	scripts/carry-wheels.sh install collections /tmp/gds-collections || exit 1
	export ANSIBLE_COLLECTIONS_PATH=$ROOT/collections:/tmp/gds-collections
fi
export ANSIBLE_CONFIG=$ROOT/ansible.cfg GDS_REPORTS_DIR=$OUT/reports ANSIBLE_FORCE_COLOR=0
ansible-playbook --version | head -1

# The data directory: the first ext4/xfs file system on a block device, unless given.
DATA=${1:-}
if [ -z "$DATA" ]; then
	mnt=$(findmnt -rn -o TARGET,SOURCE,FSTYPE | awk '$2 ~ /^\/dev\// && ($3=="ext4"||$3=="xfs") {print $1; exit}')
	DATA=${mnt%/}/gds-commission
fi
mkdir -p "$DATA"
MM=$(findmnt -no MAJ:MIN -T "$DATA" | tr -d ' ')
[ -n "$MM" ] || { echo "cannot read the block device (MAJ:MIN) of $DATA"; exit 1; }
FST=$(findmnt -no FSTYPE -T "$DATA")
RECORD=${UDEV_DATA:-/run/udev/data}/b$MM
say "data directory $DATA on $(findmnt -no SOURCE -T "$DATA") ($FST, $MM)"

if want 0; then
say "0. capture the machine for the tests (tests/fixtures/captured/)"
python3 scripts/capture-node.py "$OUT/capture" --name "${CAPTURE_NAME:-gpu-node}" --expect \
	|| failed "0. the capture of this machine"
fi

if want 1; then
say "1. GPU facts"
nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version --format=csv | tee "$OUT/nvidia-smi.csv" || failed "nvidia-smi"
nvidia-smi topo -m > "$OUT/nvidia-smi-topo-m.txt" 2>&1 && cat "$OUT/nvidia-smi-topo-m.txt"
nvidia-smi topo -mp > "$OUT/nvidia-smi-topo-mp.txt" 2>&1 || failed "1. nvidia-smi topo -mp"
for module in gds_topology gds_platform; do
	ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.builtin.json \
		ansible all -i localhost, -c local -m "gds.commission.$module" > "$OUT/${module#gds_}.json" \
		|| failed "1. the $module module (see $OUT/${module#gds_}.json)"
done
# every GPU of nvidia-smi is a GPU of the facts at the same index and PCI address, and no other
python3 - "$OUT" "$ROOT/collections" <<'PY' || failed "1. GPU facts against nvidia-smi"
import csv, json, sys
out = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from ansible_collections.gds.commission.plugins.module_utils.hw.smi_topo import TopoTextError, compare
def facts(name, key):
    doc = json.load(open("%s/%s.json" % (out, name)))
    result = doc["plays"][0]["tasks"][0]["hosts"]["localhost"]
    if key not in (result.get("ansible_facts") or {}):
        sys.exit("%s: no %s in the result: %s" % (name, key, str(result.get("msg"))[:500]))
    return result["ansible_facts"][key]
topo = facts("topology", "gds_topology")
plat = facts("platform", "gds_platform")
rows = list(csv.DictReader(open(out + "/nvidia-smi.csv"), skipinitialspace=True))
smi = {int(r["index"]): r["pci.bus_id"].lower()[4:] for r in rows}
ours = {gpu["index"]: gpu["bdf"] for gpu in topo["gpus"]}
print("gds_topology index source:", topo.get("index_source"))
for index in sorted(set(smi) | set(ours)):
    print("GPU%d facts %s | nvidia-smi %s -> %s" % (index, ours.get(index), smi.get(index),
          "MATCH" if smi.get(index) == ours.get(index) else "MISMATCH"))
print("groups:", topo["groups"])
print("nvme:", [(d["name"], d["bdf"], d["system"]) for d in topo["nvme"]])
print("disks:", [(d["name"], d["kind"], d["bdf"], d["system"], d.get("unknown")) for d in topo.get("disks", [])])
print("platform:", json.dumps({k: plat.get(k) for k in ("kernel", "arch", "iommu", "nvidia", "gpus", "nvidia_fs", "p2pdma", "udev", "lockdown")}, default=str)[:3000])
print("nvlink:", topo.get("nvlink"))
# every cell of topo -mp (PCIe classes) and topo -m (NV# against NVML's links), NUMA affinity
try:
    compared, differences = compare(topo, topo_mp=open(out + "/nvidia-smi-topo-mp.txt").read(),
                                    topo_m=open(out + "/nvidia-smi-topo-m.txt").read())
except (OSError, TopoTextError) as exc:
    sys.exit("nvidia-smi topo: %s" % exc)
print("topo -m/-mp cells compared: %d, differences: %d" % (compared, len(differences)))
for line in differences:
    print("  " + line)
if smi != ours or differences:
    sys.exit("the facts differ from nvidia-smi's")
PY

fi

if ! want 2; then
	:
elif [ -e "$RECORD" ]; then
	say "2. commission with $RECORD missing: SKIPPED"
	echo "$RECORD is present (written by udevd or an earlier run): a live udev record is never deleted,"
	echo "so the run without it is skipped; the product's preflight reports a missing record on its own."
else
	say "2. commission with $RECORD missing (it is absent on this machine)"
	ansible-playbook -i inventory/gpu-local playbooks/commission.yml -e gds_bench_target_dir="$DATA" -e gds_bench_duration=5 > "$OUT/commission-no-udev.log" 2>&1
	rc=$?; echo "exit $rc (expected: not 0, the missing record found)"
	grep -E "udev|msg: 'gpu-local" "$OUT/commission-no-udev.log" | head -12
	[ "$rc" -ne 0 ] && grep -q "udev" "$OUT/commission-no-udev.log" || failed "2. the missing udev record was not reported"
fi

udev_record "$MM" "$FST" || exit 1	# steps 3 on need it (it is left in place)
if want 3; then
say "3. commission with the udev record"
ansible-playbook -i inventory/gpu-local playbooks/commission.yml -e gds_bench_target_dir="$DATA" \
	${GPU_COMMISSION_DURATION:+-e gds_bench_duration=$GPU_COMMISSION_DURATION} > "$OUT/commission.log" 2>&1
rc=$?; echo "exit $rc"; grep -E "msg: 'gpu-local|^ *- ?'?group|PLAY RECAP" -A1 "$OUT/commission.log" | head -20
[ "$rc" -eq 0 ] || failed "3. the compat commissioning did not PASS (exit $rc, $OUT/commission.log)"
python3 - "$OUT/reports/latest/summary.json" <<'PY' || failed "3. the report of the compat run"
import json, sys
doc = json.load(open(sys.argv[1]))
for host, entry in doc["hosts"].items():
    print(host, entry["verdict"])
    for c in entry["checks"]:
        print("  %-5s %-55s expected %-22s actual %s %s" % (c["verdict"], c["name"][:55], c.get("expected"), c.get("actual"), (c.get("detail") or "")[:90]))
PY
cp -rL "$OUT/reports/latest" "$OUT/compat-report" 2>/dev/null
fi

if want 4; then
say "4. benchmark again, expecting nvidia-fs"
ansible-playbook -i inventory/gpu-local playbooks/bench.yml playbooks/report.yml -e gds_bench_target_dir="$DATA" \
	-e gds_bench_duration=5 -e gds_bench_expect_path=nvfs > "$OUT/commission-nvfs.log" 2>&1
rc=$?; echo "exit $rc (expected: not 0, the io path check FAIL)"
[ "$rc" -ne 0 ] || failed "4. a run expecting nvidia-fs passed on a node without it"
# the FAILs this step expects, and nothing else: another FAIL or an ERROR (a broken job) is a
# step that did not come out as expected, whatever the exit status says
python3 - "$OUT/reports/latest/summary.json" <<'PY' || failed "4. not exactly the io path checks FAILed (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
expected, unexpected = 0, []
for host, entry in doc["hosts"].items():
    print(host, entry["verdict"])
    for c in entry["checks"]:
        if c["verdict"] not in ("FAIL", "ERROR", "UNREACHABLE"):
            continue
        print("  %-5s %s expected %s actual %s: %s" % (c["verdict"], c["name"], c["expected"], c["actual"], c.get("detail")))
        if c["verdict"] == "FAIL" and c["name"].endswith("io path"):
            expected += 1
        else:
            unexpected.append("%s %s %s" % (host, c["verdict"], c["name"]))
if unexpected:
    sys.exit("not expected here: %s" % "; ".join(unexpected))
sys.exit(0 if expected else "no io path check FAILed")
PY
fi

if want 5; then
say "5. tune again: nothing left to change"
ansible-playbook -i inventory/gpu-local playbooks/tune.yml > "$OUT/tune-again.log" 2>&1
rc=$?; grep -A2 "PLAY RECAP" "$OUT/tune-again.log"
[ "$rc" -eq 0 ] && grep -Eq "gpu-local +: .*changed=0 " "$OUT/tune-again.log" \
	|| failed "5. a second tune run changed something or failed (exit $rc, $OUT/tune-again.log)"
fi

if want 6; then
say "6. the nightly drift check: nothing drifted"
ansible-playbook -i inventory/gpu-local playbooks/drift.yml --check > "$OUT/drift.log" 2>&1
rc=$?; echo "exit $rc"
python3 - "$OUT/reports/latest/drift.json" <<'PY' || failed "6. drift after commissioning (exit $rc, $OUT/drift.log)"
import json, sys
doc = json.load(open(sys.argv[1]))
for host, entry in doc["hosts"].items():
    print(host, "drifted:", entry["drifted"], entry.get("detail") or "", [i["setting"] for i in entry["items"]])
sys.exit(0 if all(e["drifted"] is False for e in doc["hosts"].values()) else "drifted or not checked")
PY
[ "$rc" -eq 0 ] || failed "6. the drift playbook exited $rc"
fi

tar czf "$OUT/reports.tgz" -C "$OUT" reports compat-report 2>/dev/null

if ((${#FAILED[@]})); then
	say "${#FAILED[@]} step(s) did not come out as expected"
	printf '  %s\n' "${FAILED[@]}"
	exit 1
fi
say "every step came out as expected"
