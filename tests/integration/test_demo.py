"""The `make demo` path end to end on fresh simulated nodes: commission, report files, drift.

Each test builds its own simulated nodes and report directory, so they run from a clean state.
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from conftest import COLLECTION, ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
import simtree  # noqa: E402

# the ansible-core of the interpreter running the tests (.venv, or .venv-core-2.19 for the oldest)
BIN = os.path.dirname(sys.executable)
PLAYBOOK = os.path.join(BIN, "ansible-playbook")
SCHEMAS = os.path.join(COLLECTION, "roles", "gds_report", "files")


@pytest.fixture
def demo(tmp_path):
    sim = tmp_path / "sim"
    simtree.build_inventory(os.path.join(ROOT, "inventory", "demo", "hosts.yml"), str(sim))
    env = dict(os.environ, GDS_SIM_ROOT=str(sim), GDS_REPORTS_DIR=str(tmp_path / "reports"),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CACHE_PLUGIN="memory", PATH=BIN + os.pathsep + os.environ["PATH"])
    env.pop("GDS_RUN_ID", None)

    def play(playbook, *extra, inventory=os.path.join(ROOT, "inventory", "demo")):
        proc = subprocess.run([PLAYBOOK, "-i", inventory, os.path.join(ROOT, "playbooks", playbook)] + list(extra),
                              env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
        return proc.returncode, proc.stdout + proc.stderr

    return {"sim": sim, "reports": tmp_path / "reports", "play": play, "tmp": tmp_path}


def latest(reports, name):
    with open(os.path.join(reports, "latest", name)) as handle:
        return handle.read()


def schema(name):
    with open(os.path.join(SCHEMAS, name)) as handle:
        return json.load(handle)


def test_commission_then_no_drift_then_drift_found(demo):
    rc, out = demo["play"]("commission.yml")
    assert rc == 0, out[-3000:]
    summ = json.loads(latest(demo["reports"], "summary.json"))
    jsonschema.validate(summ, schema("summary.schema.json"))
    assert summ["counts"]["PASS"] == 2 and set(summ["hosts"]) == {"sim-a100", "sim-h100"}
    # the benchmark runs in the background, a console line a job as it starts and as it ends
    planned = [r["name"] for r in json.loads(latest(demo["reports"], "sim-h100.json"))["bench"]]
    ran = [r for r in json.loads(latest(demo["reports"], "sim-h100.json"))["bench"] if r.get("cmd")]
    assert ran and "(item=job 1 of %d: raid1 seq_write, CPUONLY starts (one full pass))" % len(planned) in out
    lines = [line for line in out.splitlines() if line.startswith("gds_commission: sim-h100 job ")]
    ends = [line for line in lines if ": PASS, " in line]
    assert len(ends) == len(ran), lines  # one end line a job that ran; a planned skip has none
    assert all(" s of about 1 s" in line or "(one full pass)" in line for line in ends), ends
    starts = [line for line in lines if line.endswith(" started (about 1 s)") or line.endswith(" started (one full pass)")]
    assert len(starts) == len(ran) - 1 and len(lines) == len(ends) + len(starts), lines  # the first: the loop's label
    assert "gds_commission: sim-h100 job 2 of %d: raid1 seq_read, CPUONLY started (about 1 s)" % len(planned) in starts
    # measuring changes nothing on the node: the run in the background is no change either (idempotence)
    for task in ("Run the gdsbench jobs in order", "Follow the benchmark job by job", "Collect the benchmark run's result"):
        section = out.split("TASK [gds.commission.gds_bench : %s]" % task, 1)[1].split("TASK [", 1)[0]
        assert "changed: [" not in section, (task, section[:2000])
    for host in summ["hosts"]:
        doc = json.loads(latest(demo["reports"], host + ".json"))
        assert doc["topology"]["groups"], host
        names = [c["name"] for c in doc["checks"]]
        assert any(": throughput_gib_s" in n for n in names)
        assert any(c["verdict"] == "SKIP" and "GPU" in c["name"] for c in doc["checks"])
    ET.fromstring(latest(demo["reports"], "junit.xml").split("\n", 1)[1])
    assert "sim-h100.html" in latest(demo["reports"], "report.html")
    assert "<svg" in latest(demo["reports"], "sim-h100.html")
    assert summ["started"] < summ["finished"]  # the run's start, not the report play's
    # the benchmark's data files are gone (gds_bench_keep_files is false)
    assert not glob.glob(str(demo["sim"] / "*" / "raid*" / "gds-bench")), "data files left behind"

    rc, out = demo["play"]("drift.yml", "--check")
    assert rc == 0, out[-3000:]
    drift = json.loads(latest(demo["reports"], "drift.json"))
    jsonschema.validate(drift, schema("drift.schema.json"))
    assert all(not h["drifted"] for h in drift["hosts"].values()), drift

    # Re-enable ACS on one bridge of sim-h100 by hand: drift names exactly that bridge.
    config = glob.glob(str(demo["sim"] / "sim-h100" / "sys" / "bus" / "pci" / "devices" / "0000:39:02.0" / "config"))[0]
    with open(config, "r+b") as handle:
        handle.seek(0x148 + 6)
        handle.write(struct.pack("<H", 0x001D))
    before = open(config, "rb").read()
    rc, out = demo["play"]("drift.yml", "--check")
    assert rc != 0
    drift = json.loads(latest(demo["reports"], "drift.json"))
    assert not drift["hosts"]["sim-a100"]["drifted"]
    items = drift["hosts"]["sim-h100"]["items"]
    assert items and all("0000:39:02.0" in item["setting"] for item in items), items
    assert open(config, "rb").read() == before  # check mode changed nothing

    # Edit one key of sim-a100's cufile.json: drift names that file and that key, nothing else.
    cufile = demo["sim"] / "sim-a100" / "etc" / "cufile.json"
    doc = json.loads(cufile.read_text())
    doc["properties"]["max_direct_io_size_kb"] = 8192
    cufile.write_text(json.dumps(doc, indent=2))
    rc, out = demo["play"]("drift.yml", "--check")
    assert rc != 0
    items = json.loads(latest(demo["reports"], "drift.json"))["hosts"]["sim-a100"]["items"]
    assert items == [{"setting": "%s: properties.max_direct_io_size_kb" % cufile,
                      "expected": "16384", "actual": "8192"}], items


def test_unreachable_host_still_gets_a_report(demo):
    inventory = demo["tmp"] / "hosts.yml"
    inventory.write_text(open(os.path.join(ROOT, "inventory", "demo", "hosts.yml")).read() + """
    lost:
      hosts:
        ghost:
          ansible_host: 127.0.0.1
          ansible_port: 1
          ansible_connection: ssh
          ansible_ssh_common_args: -o ConnectTimeout=3 -o BatchMode=yes
""")
    shutil.copytree(os.path.join(ROOT, "inventory", "demo", "group_vars"), demo["tmp"] / "group_vars", symlinks=False)
    rc, out = demo["play"]("commission.yml", inventory=str(inventory))
    assert rc != 0
    summ = json.loads(latest(demo["reports"], "summary.json"))
    assert summ["hosts"]["ghost"]["verdict"] == "UNREACHABLE"
    assert summ["hosts"]["sim-a100"]["verdict"] == "PASS" and summ["hosts"]["sim-h100"]["verdict"] == "PASS"
    assert summ["counts"]["UNREACHABLE"] == 1


def test_broken_benchmark_is_an_error_and_fails_the_run(demo):
    rc, out = demo["play"]("commission.yml", "--limit", "sim-a100",
                           "-e", '{"gds_bench_jobs": [{"name": "bad", "io_type": "sideways"}]}')
    assert rc != 0
    summ = json.loads(latest(demo["reports"], "summary.json"))
    host = summ["hosts"]["sim-a100"]
    assert host["verdict"] == "ERROR"
    error = [c for c in host["checks"] if c["verdict"] == "ERROR"][0]
    assert "sideways" in error["detail"]


def test_every_host_failing_still_gets_a_report(demo):
    """A bad variable fails every host in the pre-check play, so Ansible runs no later play: the
    report is still written, the hosts ERROR with the task and the message."""
    rc, out = demo["play"]("commission.yml", "-e", '{"gds_pcie_acs_bridges": ["not-a-bdf"]}')
    assert rc != 0
    run = os.path.realpath(os.path.join(demo["reports"], "latest"))
    assert sorted(os.listdir(run)) == ["junit.xml", "report.html", "sim-a100.html", "sim-a100.json", "sim-a100.prom",
                                       "sim-h100.html", "sim-h100.json", "sim-h100.prom", "summary.json"]
    summ = json.loads(latest(demo["reports"], "summary.json"))
    jsonschema.validate(summ, schema("summary.schema.json"))
    assert summ["counts"]["ERROR"] == 2
    for host in ("sim-a100", "sim-h100"):
        error = [c for c in summ["hosts"][host]["checks"] if c["verdict"] == "ERROR"][0]
        # the task that failed (the one check of every role's variables), the role, the variable and
        # the value at fault
        assert "Check the variables of each role" in error["actual"], error
        assert "pcie_acs: gds_pcie_acs_bridges" in error["detail"] and "not-a-bdf" in error["detail"], error
    assert "not-a-bdf" in latest(demo["reports"], "junit.xml")


def test_no_job_is_no_pass(demo):
    rc, out = demo["play"]("commission.yml", "--limit", "sim-a100", "-e", '{"gds_bench_jobs": []}')
    assert rc != 0
    host = json.loads(latest(demo["reports"], "summary.json"))["hosts"]["sim-a100"]
    assert host["verdict"] == "FAIL"
    assert [c["verdict"] for c in host["checks"] if c["name"] == "bench: jobs run"] == ["FAIL"]


def test_the_benchmarks_progress_leaves_stdout_to_the_stdout_callback(demo):
    """The job lines go to stderr, as the run's last lines do: with ansible.posix.json (molecule's vm
    scenario reads bench.yml's result so) stdout is one JSON document."""
    env = dict(os.environ, GDS_SIM_ROOT=str(demo["sim"]), GDS_REPORTS_DIR=str(demo["reports"]),
               ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
               ANSIBLE_CACHE_PLUGIN="memory", PATH=BIN + os.pathsep + os.environ["PATH"])
    proc = subprocess.run([PLAYBOOK, "-i", os.path.join(ROOT, "inventory", "demo"), "--limit", "sim-a100",
                           os.path.join(ROOT, "playbooks", "bench.yml")], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    json.loads(proc.stdout)  # nothing of ours in it
    assert "gds_commission: sim-a100 job 2 of " in proc.stderr
