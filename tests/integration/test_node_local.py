"""Node-local runs under a real Slurm (Debian slurm-wlm and munge, as tests/unit/test_slurm.py
starts them, here with two registered nodes): srun starts scripts/gds-node-run on fleet-0001 and
fleet-0002, each commissioning a simulated node against itself (inventory/node-local, the report in
host scope) into one shared run directory; scripts/gds-merge makes the run's report, which has the
hosts, verdicts and checks of a push run over the same simulated nodes; gds_slurm drains from it.
Skipped, with the reason, where the daemons cannot start."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

import simtree
from conftest import ROOT, run_module, run_playbook_json
from test_slurm import NODES, Cluster

NODE_RUN = os.path.join(ROOT, "scripts", "gds-node-run")
MERGE = os.path.join(ROOT, "scripts", "gds-merge")
# node -> (fixture, platform group): the simulated node each Slurm node commissions
SIMULATED = {"fleet-0001": ("dgx-a100", "dgx_a100"), "fleet-0002": ("hgx-h100", "dgx_h100")}
# the same loose bounds in both runs: two nodes benchmarking at once on a busy 2-core machine must
# not make a figure's verdict differ between them (figures are not what this test compares)
LOOSE = {"gds_bench_thresholds": {
    "seq_write": {"throughput_gib_s": [0.001, 0.0, None, "GiB/s"]},
    "seq_read": {"throughput_gib_s": [0.001, 0.0, None, "GiB/s"], "lat_us.mean": [1e7, None, 0.0, "us"]},
    "rand_read": {"iops": [1, 0.0, None, "IOPS"], "lat_us.p99": [1e7, None, 0.0, "us"]}},
    "gds_bench_affinity_gain": [0.001, 0.0, None, "x"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # the unix socket path of munged must stay short
    short = os.path.join("/tmp", "gds-slurm-nl-%d" % os.getpid())
    os.makedirs(short, exist_ok=True)
    c = Cluster(short, real=sorted(SIMULATED))
    why = c.start()
    if why:
        c.stop()
        shutil.rmtree(short, ignore_errors=True)
        pytest.skip("no Slurm on this machine: %s" % why)
    yield c
    c.stop()
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture(scope="module")
def runs(cluster, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("node-local")
    for where in ("sim-local", "sim-push"):  # each run commissions fresh trees of its own
        for node, (fixture, _) in SIMULATED.items():
            simtree.build(fixture, str(tmp / where / node))
    (tmp / "loose.json").write_text(json.dumps(LOOSE))
    (tmp / "platforms").write_text("# node pattern, platform group\nfleet-0001 dgx_a100\nfleet-000[2-9] dgx_h100\n")
    bin_dir = os.path.dirname(sys.executable)
    env = dict(os.environ, SLURM_CONF=cluster.conf, GDS_REPORTS_DIR=str(tmp / "shared"),
               GDS_SIM_ROOT=str(tmp / "sim-local"), GDS_NODE_GROUPS="simulated",
               ANSIBLE_PLAYBOOK=os.path.join(bin_dir, "ansible-playbook"), PATH=bin_dir + os.pathsep + os.environ["PATH"])
    env.pop("GDS_RUN_ID", None)
    srun = subprocess.run(["srun", "--nodes=2", "--ntasks-per-node=1", "--nodelist=" + ",".join(sorted(SIMULATED)),
                           "--label", NODE_RUN, "--platforms", str(tmp / "platforms"), "--", "-e", "@%s" % (tmp / "loose.json")],
                          env=env, capture_output=True, text=True, timeout=1500)
    runs = os.listdir(str(tmp / "shared")) if (tmp / "shared").is_dir() else []
    run_ids = [r for r in runs if not r.startswith(".")]
    assert len(run_ids) == 1, "srun rc %d\n%s\n%s" % (srun.returncode, srun.stdout[-4000:], srun.stderr[-4000:])
    before = sorted(os.listdir(str(tmp / "shared" / run_ids[0])))
    # the push run: one controller over the same simulated nodes
    (tmp / "push").mkdir()
    (tmp / "push" / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": dict(
        [(platform, {"hosts": {node: None}}) for node, (_, platform) in SIMULATED.items()]
        + [("simulated", {"hosts": dict.fromkeys(SIMULATED)})])}}))
    os.symlink(os.path.join(ROOT, "inventory", "demo", "group_vars"), str(tmp / "push" / "group_vars"))
    push_rc, _, push = run_playbook_json(tmp / "push" / "hosts.yml", os.path.join(ROOT, "playbooks", "commission.yml"),
                                         extra_args=["-e", "@%s" % (tmp / "loose.json")], timeout=1500,
                                         env={"GDS_REPORTS_DIR": str(tmp / "push-reports"), "GDS_RUN_ID": "push-1",
                                              "GDS_SIM_ROOT": str(tmp / "sim-push")})
    # the nodes the job ran on, and one more that wrote nothing
    merged = subprocess.run([sys.executable, MERGE, "--run-id", run_ids[0], "--nodes", "fleet-[0001-0003]"],
                            env=env, capture_output=True, text=True, timeout=600)
    return dict(tmp=tmp, run_id=run_ids[0], srun=srun, before=before, push=(push_rc, push), merge=merged)


def checks_of(summary, host, roots):
    """(verdict, sorted [(check name, verdict)]) with the simulated roots' paths made alike."""
    entry = summary["hosts"][host]
    named = []
    for check in entry["checks"]:
        name = check["name"]
        for root in roots:
            name = name.replace(root, "<root>")
        named.append((name, check["verdict"]))
    return entry["verdict"], sorted(named)


def test_each_node_writes_only_its_own_files_into_the_jobs_run(runs):
    assert re.match(r"slurm-[0-9]+\Z", runs["run_id"])  # one run id for the job's tasks
    assert runs["srun"].returncode == 0, runs["srun"].stdout[-4000:] + runs["srun"].stderr[-4000:]
    assert runs["before"] == sorted("%s.%s" % (node, ext) for node in SIMULATED for ext in ("inputs.json", "json", "prom"))
    for node in SIMULATED:
        record = json.loads((runs["tmp"] / "shared" / runs["run_id"] / (node + ".inputs.json")).read_text())
        assert record["host"] == node and record["platform"] == SIMULATED[node][1]
        # each node's own textfile, on the node (its simulated root)
        assert (runs["tmp"] / "sim-local" / node / "var/lib/prometheus/node-exporter/gds_commission.prom").exists()


def test_the_merged_run_has_the_push_runs_hosts_verdicts_and_checks(runs):
    tmp = runs["tmp"]
    push_rc, push = runs["push"]
    assert push_rc == 0, push.stdout[-3000:] + push.stderr[-3000:]
    assert runs["merge"].returncode == 1, runs["merge"].stdout + runs["merge"].stderr  # fleet-0003: ERROR
    merged = json.loads((tmp / "shared" / runs["run_id"] / "summary.json").read_text())
    pushed = json.loads((tmp / "push-reports" / "push-1" / "summary.json").read_text())
    roots = [str(tmp / "sim-local"), str(tmp / "sim-push")]
    assert sorted(merged["hosts"]) == sorted(SIMULATED) + ["fleet-0003"]
    for node in SIMULATED:
        assert checks_of(merged, node, roots) == checks_of(pushed, node, roots), node
        assert merged["hosts"][node]["verdict"] == "PASS"
    missing = merged["hosts"]["fleet-0003"]["checks"]
    assert [(c["name"], c["verdict"], c["actual"]) for c in missing] == [("report: host file", "ERROR", "missing")]
    assert "fleet-0003.inputs.json" in missing[0]["detail"]
    for name in ("junit.xml", "report.html", "fleet-0001.json", "fleet-0001.html", "fleet-0003.prom"):
        assert (tmp / "shared" / runs["run_id"] / name).exists(), name
    assert os.readlink(str(tmp / "shared" / "latest")) == runs["run_id"]
    assert "fleet-0003: no " in runs["merge"].stderr


def test_gds_slurm_drains_from_the_merged_run(runs, cluster, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster.conf)
    cluster.reset()
    try:
        rc, result = run_module("gds_slurm", {"run_dir": str(runs["tmp"] / "shared" / "latest"),
                                              "hosts": sorted(SIMULATED) + ["fleet-0003"]})
        assert rc == 0, result
        assert [(d["node"], d["reason"]) for d in result["drain"]] == [("fleet-0003", "gds: report: host file: missing")]
        flags, reason = cluster.state("fleet-0003")
        assert "DRAIN" in flags and reason == "gds: report: host file: missing"
        assert [n for n in ("fleet-0001", "fleet-0002") if "DRAIN" in cluster.state(n)[0]] == []
    finally:
        cluster.reset()
    assert NODES[2] == "fleet-0003"
