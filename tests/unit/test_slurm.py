"""gds_slurm and scripts/gds-healthcheck against a real Slurm (Debian slurm-wlm, munge) started
here: one slurmctld, one slurmd registered as fleet-0001, more node names that never register
(UNKNOWN: drain works on them, resume needs a registered node). Skipped, with the reason, where
the daemons cannot start."""
import ast
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_module, run_playbook_json, task_results

from ansible_collections.gds.commission.plugins.module_utils.fleet import slurm as gds_slurm

HEALTHCHECK = os.path.join(ROOT, "scripts", "gds-healthcheck")
NODES = ["fleet-%04d" % i for i in range(1, 11)]
REAL = NODES[0]


# --------------------------------------------------------------------------------------------
# A Slurm cluster on this machine
# --------------------------------------------------------------------------------------------
def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path, lines=15):
    try:
        with open(path) as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return "(no %s)" % path


def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


class Cluster:
    def __init__(self, base, real=(REAL,)):
        self.base = str(base)
        self.real = list(real)  # the nodes that get a slurmd of their own (the others never register)
        self.conf = os.path.join(self.base, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.pids = []

    def sh(self, *argv, check=False):
        proc = subprocess.run(list(argv), capture_output=True, text=True, env=self.env, timeout=60)
        if check and proc.returncode:
            raise AssertionError("%s: %s%s" % (" ".join(argv), proc.stdout, proc.stderr))
        return proc

    def start(self):
        for tool in ("munged", "slurmctld", "slurmd", "scontrol"):
            if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
                return "%s is not installed (Debian packages slurm-wlm and munge; make test installs them)" % tool
        if os.geteuid() != 0:
            return "slurmd needs root to start"
        base = self.base
        for sub in ["state", "log"] + ["spool/" + node for node in self.real]:
            os.makedirs(os.path.join(base, sub), exist_ok=True)
        key = os.path.join(base, "munge.key")
        with open(key, "wb") as handle:
            handle.write(os.urandom(1024))
        os.chmod(key, 0o600)
        sock = os.path.join(base, "munge.sock")
        ctld_port, dead_port = _free_port(), _free_port()
        ports = dict((node, _free_port()) for node in self.real)
        host = socket.gethostname()
        with open(self.conf, "w") as handle:
            handle.write("\n".join([
                "ClusterName=gdstest", "SlurmctldHost=%s(127.0.0.1)" % host, "SlurmctldPort=%d" % ctld_port,
                "SlurmdPort=%d" % ports[self.real[0]], "SlurmUser=root", "SlurmdUser=root",
                "AuthType=auth/munge", "CredType=cred/munge", "AuthInfo=socket=%s" % sock,
                "StateSaveLocation=%s/state" % base, "SlurmdSpoolDir=%s/spool/%%n" % base,
                "SlurmctldPidFile=%s/slurmctld.pid" % base, "SlurmdPidFile=%s/slurmd-%%n.pid" % base,
                "SlurmctldLogFile=%s/log/slurmctld.log" % base, "SlurmdLogFile=%s/log/slurmd-%%n.log" % base,
                "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/linear",
                "SchedulerType=sched/builtin", "MpiDefault=none", "ReturnToService=2",
                # the nodes that never register stay UNKNOWN (not DOWN) however slow the run
                "SlurmdTimeout=3600",
                "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            ] + ["NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=1 State=UNKNOWN"
                 % (node, host, ports.get(node, dead_port)) for node in NODES] + [
                "PartitionName=gds Nodes=ALL Default=YES State=UP", ""]))
        steps = [
            ("munged", ["munged", "-S", sock, "--key-file=" + key, "--log-file=%s/log/munged.log" % base,
                        "--pid-file=%s/munged.pid" % base, "--seed-file=%s/munged.seed" % base], "munged.pid"),
            ("slurmctld", ["slurmctld", "-f", self.conf], "slurmctld.pid"),
        ] + [("slurmd", ["slurmd", "-f", self.conf, "-N", node], "slurmd-%s.pid" % node) for node in self.real]
        for name, argv, pidfile in steps:
            proc = self.sh(*argv)
            if proc.returncode:
                return "%s did not start: %s %s" % (name, proc.stdout, proc.stderr)
            pid = self._wait_pid(os.path.join(base, pidfile))
            if not pid:
                return "%s wrote no pid file; log:\n%s" % (name, _tail(os.path.join(base, "log", name + ".log")))
            self.pids.append(pid)
            if name == "slurmctld" and not self._wait(lambda: self.sh("scontrol", "ping").returncode == 0):
                return "slurmctld does not answer; log:\n%s" % _tail(os.path.join(base, "log", "slurmctld.log"))
        for node in self.real:
            if not self._wait(lambda: "UNKNOWN" not in self.state(node)[0], timeout=30):
                return "slurmd did not register %s; log:\n%s" % (node, _tail(os.path.join(base, "log", "slurmd-%s.log" % node)))
        return None

    @staticmethod
    def _wait(cond, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if cond():
                return True
            time.sleep(0.2)
        return False

    def _wait_pid(self, path):
        # a loaded machine (the rest of the suite beside it) may take its time to start a daemon
        self._wait(lambda: os.path.exists(path), timeout=45)
        try:
            with open(path) as handle:
                return int(handle.read().strip())
        except (OSError, ValueError):
            return None

    def stop(self):
        for pid in reversed(self.pids):
            try:
                os.kill(pid, 15)
            except OSError:
                continue
            # slurmctld saves its state while it stops: gone before its directory is removed
            self._wait(lambda: not os.path.exists("/proc/%d" % pid) or _zombie(pid), timeout=15)

    def state(self, node):
        """(flags, reason) as scontrol shows them."""
        proc = self.sh("scontrol", "-o", "show", "node", node, check=True)
        info = gds_slurm.parse_nodes(proc.stdout)[node]
        return info["flags"], info["reason"]

    def drain(self, node, reason):
        self.sh("scontrol", "update", "NodeName=%s" % node, "State=DRAIN", "Reason=%s" % reason, check=True)

    def set_down(self, node, reason):
        self.sh("scontrol", "update", "NodeName=%s" % node, "State=DOWN", "Reason=%s" % reason, check=True)

    def reset(self):
        """Every node undrained and up: the registered one resumed, the others undrained (a DOWN
        one resumed: IDLE and not responding, where drains work as on UNKNOWN)."""
        for node in NODES:
            flags, _ = self.state(node)
            if "DOWN" in flags or "FAIL" in flags or (node in self.real and "DRAIN" in flags):
                self.sh("scontrol", "update", "NodeName=%s" % node, "State=RESUME")
            elif "DRAIN" in flags:
                self.sh("scontrol", "update", "NodeName=%s" % node, "State=UNDRAIN")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("slurm")
    # the unix socket path of munged must stay short
    short = os.path.join("/tmp", "gds-slurm-%d" % os.getpid())
    os.makedirs(short, exist_ok=True)
    c = Cluster(short)
    why = c.start()
    if why:
        c.stop()
        pytest.skip("no Slurm on this machine: %s" % why)
    yield c
    c.stop()
    shutil.rmtree(short, ignore_errors=True)
    del base


@pytest.fixture
def slurm(cluster, monkeypatch):
    cluster.reset()
    monkeypatch.setenv("SLURM_CONF", cluster.conf)
    yield cluster
    cluster.reset()


# --------------------------------------------------------------------------------------------
# Reports as plugins/module_utils/fleet/report writes them
# --------------------------------------------------------------------------------------------
def check(name, verdict, actual=None):
    return {"name": name, "verdict": verdict, "expected": None, "actual": actual, "detail": None}


def summary_run(path, hosts):
    """hosts: {host: (verdict, [checks])}"""
    os.makedirs(str(path), exist_ok=True)
    doc = {"run_id": os.path.basename(str(path)), "hosts": {
        h: {"verdict": v, "checks": checks} for h, (v, checks) in hosts.items()}, "counts": {}}
    with open(os.path.join(str(path), "summary.json"), "w") as handle:
        json.dump(doc, handle)
    return str(path)


def drift_run(path, hosts):
    """hosts: {host: [settings] (drifted) / [] (clean) / 'error' / 'unreachable'}"""
    os.makedirs(str(path), exist_ok=True)
    out = {}
    for host, items in hosts.items():
        if items == "error":
            out[host] = {"drifted": None, "error": True, "items": [], "detail": "failed in task 'x': boom"}
        elif items == "unreachable":
            out[host] = {"drifted": None, "unreachable": True, "items": []}
        else:
            out[host] = {"drifted": bool(items), "items": [{"setting": s, "expected": "a", "actual": "b"} for s in items]}
    with open(os.path.join(str(path), "drift.json"), "w") as handle:
        json.dump({"run_id": "r", "hosts": out}, handle)
    return str(path)


def passing(*hosts):
    return dict((h, ("PASS", [check("acs: ok", "PASS")])) for h in hosts)


# --------------------------------------------------------------------------------------------
# Reading reports and scontrol
# --------------------------------------------------------------------------------------------
SCONTROL_LINE = ("NodeName=fleet-0001 Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 State=IDLE+DRAIN+NOT_RESPONDING "
                 "ThreadsPerCore=1 Partitions=gds  BootTime=2026-11-23T13:32:58 CfgTRES=cpu=1,mem=1M,billing=1 "
                 "AllocTRES= CapWatts=n/a ExtSensorsTemp=n/s Reason=gds: acs: 0000:00:01.1 ACS control "
                 "[root@2026-11-23T16:31:45]\n"
                 "NodeName=fleet-0002 CoresPerSocket=1 State=UNKNOWN ThreadsPerCore=1 ExtSensorsTemp=n/s\n")


def test_parse_nodes_reads_flags_and_a_reason_with_spaces():
    nodes = gds_slurm.parse_nodes(SCONTROL_LINE)
    assert nodes["fleet-0001"] == {"flags": ["IDLE", "DRAIN", "NOT_RESPONDING"], "reason": "gds: acs: 0000:00:01.1 ACS control"}
    assert nodes["fleet-0002"] == {"flags": ["UNKNOWN"], "reason": None}


def test_load_run_reason_is_the_check_that_decided_the_verdict(tmp_path):
    run = gds_slurm.load_run(summary_run(tmp_path / "r", {
        "a": ("FAIL", [check("acs: ok", "PASS"), check("bench: seq_read throughput", "FAIL"), check("iommu: x", "WARN")]),
        "b": ("ERROR", [check("raid: planned", "FAIL"), check("host: play completed", "ERROR", "failed in task 'Plan'")]),
        "c": ("UNREACHABLE", [check("host: reachable", "UNREACHABLE")]),
        "d": ("PASS", [check("iommu: x", "WARN")]),
    }))
    assert run["a"] == {"status": "bad", "verdict": "FAIL", "reason": "gds: bench: seq_read throughput", "mode": "commission"}
    assert run["b"]["reason"] == "gds: host: play completed: failed in task 'Plan'"
    assert run["c"]["status"] == "unknown" and run["d"]["status"] == "good"


def test_load_run_drift_and_both_documents(tmp_path):
    path = drift_run(tmp_path / "r", {"a": ["/etc/cufile.json: properties.x"], "b": [], "c": "error", "d": "unreachable"})
    run = gds_slurm.load_run(path)
    assert run["a"]["reason"] == "gds: drift: /etc/cufile.json: properties.x" and run["a"]["status"] == "bad"
    assert run["b"] == {"status": "good", "verdict": "PASS", "reason": None, "mode": "drift"}
    assert run["c"]["status"] == "bad" and "boom" in run["c"]["reason"]
    assert run["d"]["status"] == "unknown"
    summary_run(path, {"a": ("PASS", []), "b": ("FAIL", [check("bench: x", "FAIL")])})
    both = gds_slurm.load_run(path)
    assert both["a"]["status"] == "bad" and both["b"]["reason"] == "gds: bench: x"


@pytest.mark.parametrize("content, expected", [
    (None, "neither summary.json nor drift.json"),
    ("{not json", "summary.json is not valid JSON"),
    ('{"hosts": []}', "summary.json: key 'hosts' missing or not a mapping"),
])
def test_load_run_bad_input_names_the_file(tmp_path, content, expected):
    path = tmp_path / "r"
    path.mkdir()
    if content is not None:
        (path / "summary.json").write_text(content)
    with pytest.raises(gds_slurm.SlurmError, match=expected):
        gds_slurm.load_run(str(path))


def test_reason_is_one_bounded_line():
    text = gds_slurm.reason("gds:", "bench:\n" + "x" * 500)
    assert "\n" not in text and len(text) == gds_slurm.REASON_MAX and text.startswith("gds: bench: xxx")


def test_breaker_limit_has_a_floor_and_counts_only_new_drains():
    run = dict(("h%d" % i, {"status": "bad", "verdict": "FAIL", "reason": "gds: x", "mode": "commission"}) for i in range(30))
    nodes = dict(("h%d" % i, {"flags": ["IDLE"], "reason": None}) for i in range(30))
    assert gds_slurm.plan(run, nodes)["limit"] == 3 and gds_slurm.plan(run, nodes)["tripped"]
    for i in range(28):
        nodes["h%d" % i] = {"flags": ["IDLE", "DRAIN"], "reason": "gds: x"}
    p = gds_slurm.plan(run, nodes)
    assert len(p["drain"]) == 2 and not p["tripped"] and len(p["kept"]) == 28
    small = gds_slurm.plan({"a": run["h0"]}, {"a": {"flags": ["IDLE"], "reason": None}})
    assert small["limit"] == 1 and not small["tripped"]


# --------------------------------------------------------------------------------------------
# Real Slurm
# --------------------------------------------------------------------------------------------
def slurm_module(run_dir, check_mode=False, **args):
    return run_module("gds_slurm", dict(args, run_dir=run_dir), check_mode=check_mode)


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_drains_failing_nodes_and_resumes_only_its_own(slurm, tmp_path):
    slurm.drain(NODES[2], "admin: replacing a DIMM")
    hosts = passing(*NODES[3:])
    hosts[REAL] = ("FAIL", [check("acs: ok", "PASS"), check("acs: 0000:00:01.1 ACS control", "FAIL")])
    hosts[NODES[1]] = ("ERROR", [check("host: play completed", "ERROR", "failed in task 'Plan'")])
    hosts[NODES[2]] = ("FAIL", [check("bench: x", "FAIL")])
    rc, res = slurm_module(summary_run(tmp_path / "one", hosts), max_drain_percent=20)
    assert rc == 0, res
    assert sorted(i["node"] for i in res["drain"]) == [REAL, NODES[1]]
    assert slurm.state(REAL) == (["IDLE", "DRAIN"], "gds: acs: 0000:00:01.1 ACS control") or \
        ("DRAIN" in slurm.state(REAL)[0] and slurm.state(REAL)[1] == "gds: acs: 0000:00:01.1 ACS control")
    assert slurm.state(NODES[1])[1] == "gds: host: play completed: failed in task 'Plan'"
    assert slurm.state(NODES[2])[1] == "admin: replacing a DIMM"
    # the same report again: nothing to do
    rc, res = slurm_module(summary_run(tmp_path / "one", hosts), max_drain_percent=20)
    assert rc == 0 and not res["changed"] and res["commands"] == []
    # everything passes now: our registered node comes back, the admin's drain stays
    rc, res = slurm_module(summary_run(tmp_path / "two", passing(*NODES)), hosts=[REAL, NODES[2]])
    assert rc == 0, res
    assert [i["node"] for i in res["resume"]] == [REAL]
    assert "DRAIN" not in slurm.state(REAL)[0]
    assert slurm.state(NODES[2]) == (["UNKNOWN", "DRAIN"], "admin: replacing a DIMM") or \
        slurm.state(NODES[2])[1] == "admin: replacing a DIMM"


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_circuit_breaker_refuses_and_changes_nothing(slurm, tmp_path):
    hosts = passing(*NODES)
    for node in NODES[:3]:
        hosts[node] = ("FAIL", [check("bench: seq_read throughput", "FAIL")])
    rc, res = slurm_module(summary_run(tmp_path / "r", hosts))  # 10 % of 10 nodes: 1
    assert rc != 0 and res["tripped"] and res["limit"] == 1
    assert "circuit breaker" in res["msg"] and "3 of 10" in res["msg"]
    assert all("DRAIN" not in slurm.state(n)[0] for n in NODES)
    rc, res = slurm_module(summary_run(tmp_path / "r", hosts), max_drain_percent=30)
    assert rc == 0 and all("DRAIN" in slurm.state(n)[0] for n in NODES[:3])


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
@pytest.mark.parametrize("mode", ["dry_run", "check_mode"])
def test_dry_run_plans_and_changes_nothing(slurm, tmp_path, mode):
    slurm.drain(REAL, "gds: bench: old failure")
    hosts = passing(*NODES)
    hosts[NODES[1]] = ("FAIL", [check("bench: x", "FAIL")])
    rc, res = slurm_module(summary_run(tmp_path / "r", hosts), check_mode=mode == "check_mode", dry_run=mode == "dry_run")
    assert rc == 0 and res["changed"]
    assert res["commands"] == ["scontrol update NodeName=%s State=DRAIN Reason=gds: bench: x" % NODES[1],
                               "scontrol update NodeName=%s State=RESUME" % REAL]
    assert slurm.state(REAL)[1] == "gds: bench: old failure" and "DRAIN" not in slurm.state(NODES[1])[0]


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_node_names_come_from_the_inventory_mapping(slurm, tmp_path):
    hosts = {"gpu-a.example.com": ("FAIL", [check("bench: x", "FAIL")]), "gpu-b": ("PASS", []),
             "fleet-0004.cluster.local": ("PASS", [])}
    rc, res = slurm_module(summary_run(tmp_path / "r", hosts), nodes={"gpu-a.example.com": REAL})
    assert rc == 0, res
    assert res["drain"][0]["node"] == REAL and "DRAIN" in slurm.state(REAL)[0]
    assert res["not_in_slurm"] == [{"host": "gpu-b", "node": "gpu-b"}]  # short name of fleet-0004.cluster.local is known
    assert res["candidates"] == 2


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_drift_run_drains_drift_and_clears_only_drift_drains(slurm, tmp_path):
    slurm.drain(NODES[2], "gds: bench: seq_read throughput")
    rc, res = slurm_module(drift_run(tmp_path / "d1", {REAL: ["/etc/cufile.json: properties.x"], NODES[2]: []}))
    assert rc == 0 and slurm.state(REAL)[1] == "gds: drift: /etc/cufile.json: properties.x"
    rc, res = slurm_module(drift_run(tmp_path / "d2", {REAL: [], NODES[2]: []}))
    assert rc == 0 and [i["node"] for i in res["resume"]] == [REAL]
    assert "DRAIN" not in slurm.state(REAL)[0]
    assert slurm.state(NODES[2])[1] == "gds: bench: seq_read throughput"  # only a commissioning PASS clears it


def test_scontrol_missing_is_a_clear_error(tmp_path):
    rc, res = slurm_module(summary_run(tmp_path / "r", passing("a")), scontrol=str(tmp_path / "no-scontrol"))
    assert rc != 0 and "no-scontrol" in res["msg"] and "Traceback" not in res["msg"]


# --------------------------------------------------------------------------------------------
# The HealthCheckProgram
# --------------------------------------------------------------------------------------------
def healthcheck(path, *args, env=None, node=REAL):
    """gds-healthcheck as slurmd runs it on ``node`` (SLURMD_NODENAME; None: not under slurmd)."""
    env = dict(env or os.environ)
    env.pop("SLURMD_NODENAME", None)
    if node:
        env["SLURMD_NODENAME"] = node
    proc = subprocess.run([sys.executable, HEALTHCHECK, "--file", str(path)] + list(args), capture_output=True,
                          text=True, env=env, timeout=30)
    return proc.returncode, proc.stdout + proc.stderr


def verdict_file(path, status, reason=None, node=REAL, mode="commission"):
    path.write_text(json.dumps({"status": status, "verdict": "FAIL" if status == "bad" else "PASS",
                                "reason": reason, "node": node, "mode": mode}))
    return path


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_healthcheck_drains_itself_and_resumes_its_own_drain(slurm, tmp_path):
    path = verdict_file(tmp_path / "v.json", "bad", "gds: bench: seq_read throughput")
    rc, out = healthcheck(path, env=slurm.env)
    assert rc == 1 and "drained" in out, out
    assert slurm.state(REAL)[1] == "gds: bench: seq_read throughput"
    rc, out = healthcheck(verdict_file(path, "good"), env=slurm.env)
    assert rc == 0 and "resumed" in out and "DRAIN" not in slurm.state(REAL)[0]
    slurm.drain(REAL, "admin: maintenance")
    rc, out = healthcheck(path, env=slurm.env)
    assert rc == 0 and slurm.state(REAL)[1] == "admin: maintenance"


def test_healthcheck_without_slurm(tmp_path):
    rc, out = healthcheck(tmp_path / "missing.json")
    assert rc == 0 and "not checked yet" in out
    (tmp_path / "bad.json").write_text("{oops")
    rc, out = healthcheck(tmp_path / "bad.json")
    assert rc == 2 and "bad.json" in out and "Traceback" not in out
    rc, out = healthcheck(verdict_file(tmp_path / "v.json", "bad", "gds: acs: x"), "--no-drain")
    assert rc == 1 and "gds: acs: x" in out
    path = verdict_file(tmp_path / "old.json", "good")
    os.utime(path, (time.time() - 7200, time.time() - 7200))
    rc, out = healthcheck(path, "--no-drain", "--max-age", "1")
    assert rc == 1 and "old" in out


# --------------------------------------------------------------------------------------------
# playbooks/slurm.yml end to end
# --------------------------------------------------------------------------------------------
def run_playbook(slurm, tmp_path, run_dir, *extra, hostvars=None):
    inventory = tmp_path / "hosts.yml"
    hosts = {REAL: {}, NODES[1]: dict(hostvars or {}), "gpu-x.example.com": {"gds_slurm_node_name": NODES[2]}}
    for host, hostvars in hosts.items():
        hostvars.update(ansible_connection="local", ansible_python_interpreter=sys.executable,
                        gds_root=str(tmp_path / "nodes" / host))
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    env = dict(slurm.env, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), GDS_REPORTS_DIR=str(tmp_path / "reports"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                           os.path.join(ROOT, "playbooks", "slurm.yml"), "-e", "gds_slurm_run_dir=%s" % run_dir,
                           "-e", "gds_slurm_max_drain_percent=100"] + list(extra),
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_slurm_playbook_drains_maps_names_and_writes_verdict_files(slurm, tmp_path):
    hosts = passing(NODES[1])
    hosts[REAL] = ("FAIL", [check("bench: seq_read throughput", "FAIL")])
    hosts["gpu-x.example.com"] = ("FAIL", [check("acs: 0000:00:01.1 ACS control", "FAIL")])
    run_dir = summary_run(tmp_path / "run", hosts)
    rc, out = run_playbook(slurm, tmp_path, run_dir, "-e", "gds_slurm_dry_run=true")
    assert rc == 0, out
    assert "would run" in out and "DRAIN" not in slurm.state(REAL)[0]
    assert not (tmp_path / "nodes" / REAL / "var").exists()
    rc, out = run_playbook(slurm, tmp_path, run_dir)
    assert rc == 0, out
    assert slurm.state(REAL)[1] == "gds: bench: seq_read throughput"
    assert slurm.state(NODES[2])[1] == "gds: acs: 0000:00:01.1 ACS control"
    verdict = json.loads((tmp_path / "nodes" / "gpu-x.example.com" / "var" / "lib" / "gds-commission" / "verdict.json").read_text())
    assert verdict["node"] == NODES[2] and verdict["status"] == "bad" and verdict["reason"].startswith("gds: acs:")
    assert verdict["reason_prefix"] == "gds:"  # gds-healthcheck follows the role's prefix
    # the node's own health check agrees with the controller: already drained, exit 1
    rc, out = healthcheck(tmp_path / "nodes" / REAL / "var" / "lib" / "gds-commission" / "verdict.json", env=slurm.env)
    assert rc == 1 and "already drained" in out


# --------------------------------------------------------------------------------------------
# Hostile input: nodes that are not ours, shared nodes, corrupted reports, reasons
# --------------------------------------------------------------------------------------------
def one_node_plan(state, slurm_reason, status, reason="gds: bench: x", mode="commission", prefix="gds:"):
    run = {"h": {"status": status, "verdict": {"bad": "FAIL", "good": "PASS", "unknown": "UNREACHABLE"}[status],
                 "reason": reason if status == "bad" else None, "mode": mode}}
    nodes = gds_slurm.parse_nodes("NodeName=h CPUAlloc=0 State=%s ThreadsPerCore=1%s\n"
                                  % (state, " Reason=%s [root@2026-11-23T16:31:45]" % slurm_reason if slurm_reason else ""))
    return gds_slurm.plan(run, nodes, prefix=prefix, max_drain_percent=100)


@pytest.mark.parametrize("state, expected", [
    ("DOWN*+DRAIN", ["DOWN", "NOT_RESPONDING", "DRAIN"]),
    ("IDLE+DRAIN+NOT_RESPONDING", ["IDLE", "DRAIN", "NOT_RESPONDING"]),
    ("mixed+drain", ["MIXED", "DRAIN"]),
    ("drng", ["DRAIN"]),
    ("DRAINED", ["DRAIN"]),
    ("idle~", ["IDLE", "POWERED_DOWN"]),
    ("FAILING", ["FAIL"]),
    (["idle", "drain"], ["IDLE", "DRAIN"]),
    ("", []),
])
def test_node_flags_reads_every_spelling_of_a_state(state, expected):
    assert gds_slurm.node_flags(state) == expected


NOT_OURS = [
    ("DOWN", "admin: PSU replaced"),
    ("DOWN", "Not responding"),
    ("DOWN*", "Not responding"),
    ("DOWN+DRAIN", "admin: DIMM"),
    ("DOWN+DRAIN", "gds: bench: old"),            # ours once, DOWN now: whoever set DOWN owns it
    ("DOWN+NOT_RESPONDING", "gds: bench: old"),
    ("IDLE+DRAIN", "admin: firmware"),
    ("IDLE+DRAIN", "gdsx: not our prefix"),
    ("IDLE+DRAIN", "gds:no space, not ours"),
    ("IDLE+DRAIN", None),
    ("DRAIN+NOT_RESPONDING", "admin: cable"),
    ("MIXED+DRAIN", "admin: after this job"),
    ("ALLOCATED+DRAIN", "Kill task failed"),
    ("drained", "admin: sinfo spelling"),
    ("drng*", "admin: sinfo spelling"),
    ("IDLE+FAIL", "admin: fail it"),
    ("UNKNOWN+FAIL+NOT_RESPONDING", "admin"),
    ("IDLE+REBOOT_REQUESTED", "admin: kernel update"),
    ("IDLE+INVALID_REG", "Low RealMemory"),
    ("IDLE", "admin: a note without a drain"),
    ("IDLE+SOMETHING_NEW", None),                 # a state this tool does not know
    ("", None),                                   # no state at all
]


@pytest.mark.parametrize("state, slurm_reason", NOT_OURS)
@pytest.mark.parametrize("status", ["bad", "good", "unknown"])
def test_plan_never_touches_a_node_that_is_down_or_someone_elses(state, slurm_reason, status):
    p = one_node_plan(state, slurm_reason, status)
    assert p["drain"] == [] and p["reason"] == [] and p["resume"] == [], p
    assert gds_slurm.commands(p) == []
    if status == "bad":
        assert [i["node"] for i in p["kept"]] == ["h"] and p["kept"][0]["why"]


@pytest.mark.parametrize("state, slurm_reason, status, key", [
    ("IDLE", None, "bad", "drain"),
    ("UNKNOWN+NOT_RESPONDING", None, "bad", "drain"),
    ("IDLE*", None, "bad", "drain"),
    ("IDLE+DRAIN+NOT_RESPONDING", "gds: bench: old", "bad", "reason"),
    ("MIXED+DRAIN", "gds: bench: old", "good", "resume"),
    ("IDLE+DRAIN", "gds: bench: x", "good", "resume"),
])
def test_plan_still_acts_on_its_own_nodes(state, slurm_reason, status, key):
    assert [i["node"] for i in one_node_plan(state, slurm_reason, status)[key]] == ["h"]


@pytest.mark.parametrize("hosts, names, pair", [
    (["gpu01.rack1.example", "gpu01.rack2.example"], {}, ("gpu01.rack1.example", "gpu01.rack2.example")),
    (["a", "b"], {"a": "fleet-0001", "b": "fleet-0001"}, ("a", "b")),
    (["fleet-0001", "gpu-x"], {"gpu-x": "fleet-0001"}, ("fleet-0001", "gpu-x")),
    (["10.0.0.1", "10.0.0.2"], {}, ("10.0.0.1", "10.0.0.2")),
])
def test_two_hosts_on_one_node_are_refused_naming_both(hosts, names, pair):
    run = {hosts[0]: {"status": "bad", "verdict": "FAIL", "reason": "gds: x", "mode": "commission"},
           hosts[1]: {"status": "good", "verdict": "PASS", "reason": None, "mode": "commission"}}
    nodes = {n: {"flags": ["IDLE", "DRAIN"], "reason": "gds: x"} for n in ("fleet-0001", "gpu01", "10")}
    with pytest.raises(gds_slurm.SlurmError) as info:
        gds_slurm.plan(run, nodes, names, max_drain_percent=100)
    assert all(host in str(info.value) for host in pair), info.value
    # a host of the play that is not in the report still may not share a node
    with pytest.raises(gds_slurm.SlurmError, match="both map"):
        gds_slurm.plan({hosts[0]: run[hosts[0]]}, nodes, names, max_drain_percent=100, hosts=set(hosts))


@pytest.mark.parametrize("node", ["fleet-000[2-3]", "fleet-0002,fleet-0003", "fleet-0002 fleet-0003", "a=b",
                                  "-x", "node\nNodeName=y", ["fleet-0002"], 7])
def test_a_node_name_that_is_not_one_plain_node_is_refused(node):
    run = {"h": {"status": "bad", "verdict": "FAIL", "reason": "gds: x", "mode": "commission"}}
    with pytest.raises(gds_slurm.SlurmError, match='host "h": Slurm node name'):
        gds_slurm.plan(run, {}, {"h": node})


SUMMARY_BROKEN = [
    ('{"hosts": {"h": "PASS"}}', 'hosts["h"]'),
    ('{"hosts": {"h": null}}', 'hosts["h"]'),
    ('{"hosts": {"h": []}}', 'hosts["h"]'),
    ('{"hosts": {"h": {"verdict": null}}}', 'hosts["h"].verdict'),
    ('{"hosts": {"h": {"checks": []}}}', 'hosts["h"].verdict'),
    ('{"hosts": {"h": {"verdict": "BANANA"}}}', 'hosts["h"].verdict'),
    ('{"hosts": {"h": {"verdict": 1}}}', 'hosts["h"].verdict'),
    ('{"hosts": {"h": {"verdict": "FAIL", "checks": "x"}}}', 'hosts["h"].checks'),
    ('{"hosts": {"h": {"verdict": "FAIL", "checks": [null]}}}', 'hosts["h"].checks[0]'),
    ('{"hosts": {"h": {"verdict": "FAIL", "checks": [{"name": 3, "verdict": "FAIL"}]}}}', 'hosts["h"].checks[0].name'),
    ('{"hosts": {"h": {"verdict": "FAIL", "checks": [{"name": "x", "verdict": null}]}}}', 'hosts["h"].checks[0].verdict'),
    ('{"hosts": {"h": {"verdict": "PASS", "checks": [{"name": "x", "verdict": "FAIL"}]}}}', 'hosts["h"].verdict'),
    ('{"hosts": {"h": {"verdict": "PASS"}, "h": {"verdict": "FAIL"}}}', 'duplicate key "h"'),
    ('{"hosts": {"": {"verdict": "PASS"}}}', 'hosts[""]'),
    ('{"hosts": ' + "[" * 100000 + "]" * 100000 + "}", "not valid JSON"),  # RecursionError
]
DRIFT_BROKEN = [
    ('{"hosts": {"h": "x"}}', 'hosts["h"]'),
    ('{"hosts": {"h": {}}}', 'hosts["h"].drifted'),
    ('{"hosts": {"h": {"drifted": "no"}}}', 'hosts["h"].drifted'),
    ('{"hosts": {"h": {"drifted": 0}}}', 'hosts["h"].drifted'),
    ('{"hosts": {"h": {"drifted": true, "items": "x"}}}', 'hosts["h"].items'),
    ('{"hosts": {"h": {"drifted": true, "items": [null]}}}', 'hosts["h"].items[0]'),
    ('{"hosts": {"h": {"drifted": true, "items": [{"setting": 5}]}}}', 'hosts["h"].items[0].setting'),
    ('{"hosts": {"h": {"drifted": false, "items": [{"setting": "x"}]}}}', 'hosts["h"].drifted'),
    ('{"hosts": {"h": {"drifted": null, "error": "yes"}}}', 'hosts["h"].error'),
    ('{"hosts": {"h": {"drifted": null, "error": true, "detail": ["x"]}}}', 'hosts["h"].detail'),
]


@pytest.mark.parametrize("name, content, key", [("summary.json",) + c for c in SUMMARY_BROKEN]
                         + [("drift.json",) + c for c in DRIFT_BROKEN],
                         ids=["%s:%s" % (n, c[1]) for n in ("summary.json", "drift.json")
                              for c in (SUMMARY_BROKEN if n == "summary.json" else DRIFT_BROKEN)])
def test_a_report_it_cannot_read_names_the_file_and_the_key(tmp_path, name, content, key):
    path = tmp_path / "r"
    path.mkdir()
    (path / name).write_text(content)
    with pytest.raises(gds_slurm.SlurmError) as info:
        gds_slurm.load_run(str(path))
    assert name in str(info.value) and key in str(info.value), info.value


def test_a_report_that_is_not_utf8_or_not_a_file_is_a_clear_error(tmp_path):
    path = tmp_path / "r"
    path.mkdir()
    (path / "summary.json").write_bytes(b'{"hosts": {"h\xff": {"verdict": "PASS"}}}')
    with pytest.raises(gds_slurm.SlurmError, match="summary.json is not valid JSON"):
        gds_slurm.load_run(str(path))
    (path / "summary.json").unlink()
    (path / "drift.json").mkdir()
    with pytest.raises(gds_slurm.SlurmError, match="cannot read .*drift.json"):
        gds_slurm.load_run(str(path))


HOSTILE_TEXT = [
    "bench: \x1b[31mred\x1b[0m",
    "mount: /mnt/a\nb",
    "nul\x00byte\x7f and \x9b",
    "netfs: /mnt/x Mode=rdma",
    "x State=IDLE Reason=gds: pass",
    "tab\there\r\n",
    "bidi \u202egnp.exe and \u200bzero width",
    "line\u2028separator\x85next",
    "ends like slurm's own [root@2026-01-01T00:00:00]",
    "\"quoted whole\"",
    "é 日本 " + "=" * 300,
]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_reason_is_printable_one_field_and_reads_back_as_itself(text):
    why = gds_slurm.reason("gds:", text)
    assert why.startswith("gds: ") and len(why) <= gds_slurm.REASON_MAX
    assert why.isprintable() and "=" not in why, why
    # idempotent: a reason built from our own reason is the same reason
    assert gds_slurm.reason("gds:", why[len("gds: "):]) == why
    # and scontrol's one-line output gives it back unchanged
    line = "NodeName=n State=IDLE+DRAIN Partitions=gds Reason=%s [root@2026-11-23T16:31:45]\n" % why
    assert gds_slurm.parse_nodes(line)["n"] == {"flags": ["IDLE", "DRAIN"], "reason": why}


@pytest.mark.parametrize("prefix", ["", " ", "gds: x", "a=b", '"gds"', "x" * 33, "gds:\n", None])
def test_a_reason_prefix_that_cannot_mark_our_drains_is_refused(tmp_path, prefix):
    with pytest.raises(gds_slurm.SlurmError, match="reason_prefix"):
        gds_slurm.load_run(summary_run(tmp_path / "r", passing("a")), prefix)


def test_a_node_listed_twice_by_scontrol_is_not_trusted():
    nodes = gds_slurm.parse_nodes("NodeName=a State=IDLE\nNodeName=a State=IDLE+DRAIN Reason=gds: x [r@t]\n")
    assert gds_slurm.untouchable(nodes["a"]["flags"], nodes["a"]["reason"], "gds:")


RULES = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission", "plugins", "module_utils",
                     "fleet", "slurm_rules.py")


def _top_level_names(path):
    """The names a Python file defines at its top level (assignments, functions, classes)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def test_healthcheck_carries_no_copy_of_the_rules():
    """The rules gds-healthcheck follows are fleet/slurm_rules.py's, which gds_slurm follows too:
    the script defines none of them itself (it read its own copies before)."""
    rules = _top_level_names(RULES) - {"re"}
    assert {"STATES", "MODES", "NODE_NAME", "PREFIX", "reason", "untouchable", "parse_nodes"} <= rules
    assert not rules & _top_level_names(HEALTHCHECK), "gds-healthcheck defines a rule of its own"


def install_healthcheck(tmp_path):
    """gds-healthcheck as the gds_slurm role installs it on a node: (path, task results)."""
    path = tmp_path / "node" / "usr" / "local" / "sbin" / "gds-healthcheck"
    (tmp_path / "play.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: gds.commission.gds_slurm, tasks_from: healthcheck}\n")
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {REAL: {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "gds_slurm_healthcheck_path": str(path)}}}}))
    (tmp_path / "node" / "usr" / "local" / "sbin").mkdir(parents=True, exist_ok=True)
    rc, data, proc = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml")
    assert rc == 0, proc.stdout[-3000:]
    return path, [res for name, host, res in task_results(data) if "health check" in name]


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_the_role_installs_the_healthcheck_with_the_rules_in_it(tmp_path):
    path, results = install_healthcheck(tmp_path)
    assert results and results[-1]["changed"]
    text = path.read_text()
    with open(RULES, encoding="utf-8") as handle:
        assert handle.read() in text
    assert "_RULES" not in text and os.access(str(path), os.X_OK)
    # the node has no collection: the installed script runs from its text alone
    alone = tmp_path / "bare" / "gds-healthcheck"
    alone.parent.mkdir()
    shutil.copy(str(path), str(alone))
    scontrol, env = fake_scontrol(tmp_path)
    verdict = tmp_path / "v.json"
    verdict.write_text(json.dumps({"status": "good", "verdict": "FAIL", "mode": "commission", "node": REAL}))
    proc = subprocess.run([sys.executable, str(alone), "--file", str(verdict), "--node", REAL, "--scontrol", scontrol],
                          capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 1 and "verdict file not understood" in proc.stdout, proc.stdout + proc.stderr
    assert updates(tmp_path)[0][3] == "Reason=gds: verdict file not understood: status good, verdict FAIL, mode commission"
    # drained by a commissioning run, a drift pass leaves the node drained (slurm_rules.drift_cannot_resume)
    scontrol, env = fake_scontrol(tmp_path, "IDLE+DRAIN", "gds: bench: x")
    verdict.write_text(json.dumps({"status": "good", "verdict": "PASS", "mode": "drift", "node": REAL}))
    proc = subprocess.run([sys.executable, str(alone), "--file", str(verdict), "--node", REAL, "--scontrol", scontrol],
                          capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 0 and "kept drained" in proc.stdout and len(updates(tmp_path)) == 1, proc.stdout
    # installed again: nothing changes
    dummy, results = install_healthcheck(tmp_path)
    assert not results[-1]["changed"]


def test_healthcheck_out_of_the_collection_without_the_role_says_so(tmp_path):
    alone = tmp_path / "gds-healthcheck"
    shutil.copy(HEALTHCHECK, str(alone))
    proc = subprocess.run([sys.executable, str(alone), "--file", str(tmp_path / "v.json")], capture_output=True,
                          text=True, timeout=30)
    assert proc.returncode == 2 and "gds_slurm_healthcheck_install" in proc.stdout and "Traceback" not in proc.stderr


def test_load_run_writes_only_states_the_healthcheck_understands(tmp_path):
    hosts = dict(passing("good"), bad=("FAIL", [check("bench: x", "FAIL")]), err=("ERROR", [check("host: y", "ERROR")]),
                 gone=("UNREACHABLE", []), warn=("WARN", [check("bench: z", "WARN")]))
    run_dir = summary_run(tmp_path / "r", hosts)
    with open(os.path.join(run_dir, "drift.json"), "w") as handle:
        json.dump({"hosts": {"good": {"drifted": False}, "warn": {"drifted": True, "items": [{"setting": "s"}]},
                             "gone": {"drifted": None, "unreachable": True}, "new": {"drifted": None, "error": True}}},
                  handle)
    states = gds_slurm.load_run(run_dir)
    assert len(states) == 6
    for host, entry in states.items():
        assert gds_slurm.state_problem(entry) is None, (host, entry)


# what no run writes: each drains the node that holds it
VERDICT_FILES = [
    {"status": "BAD", "verdict": "FAIL", "mode": "commission"},
    {"status": "good", "verdict": "FAIL", "mode": "commission"},
    {"status": "bad", "verdict": "PASS", "mode": "commission"},
    {"status": "unknown", "verdict": "FAIL", "mode": "commission"},
    {"status": "good", "verdict": "PASS", "mode": "later"},
    {"status": "good", "verdict": None, "mode": "commission"},
    {"status": "maybe", "verdict": "WARN", "mode": "commission"},
    {"status": 1, "verdict": "PASS", "mode": "commission"},
    {"status": ["bad"], "verdict": "FAIL", "mode": "commission"},
    {"verdict": "PASS", "mode": "commission"},
    {"status": "good", "verdict": "PASS"},
]


FAKE_SCONTROL = """#!%s
import json, os, sys
with open(os.environ["FAKE_SCONTROL_LOG"], "a") as handle:
    handle.write(json.dumps(sys.argv[1:]) + "\\n")
if sys.argv[1:3] == ["-o", "show"]:
    print("NodeName=%%s Arch=x86_64 State=%%s Partitions=gds%%s" %% (
        sys.argv[4], os.environ["FAKE_STATE"], " Reason=" + os.environ["FAKE_REASON"] if os.environ.get("FAKE_REASON") else ""))
""" % sys.executable


def fake_scontrol(tmp_path, state="IDLE", reason=None):
    path = tmp_path / "scontrol"
    path.write_text(FAKE_SCONTROL)
    path.chmod(0o755)
    env = dict(os.environ, FAKE_SCONTROL_LOG=str(tmp_path / "scontrol.log"), FAKE_STATE=state, FAKE_REASON=reason or "")
    return str(path), env


def updates(tmp_path):
    log = tmp_path / "scontrol.log"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [call for call in calls if call[:1] == ["update"]]


@pytest.mark.parametrize("content", VERDICT_FILES, ids=lambda c: "-".join("%s" % c.get(k) for k in ("status", "verdict", "mode")))
def test_healthcheck_drains_on_a_verdict_file_it_does_not_understand(tmp_path, content):
    path = tmp_path / "v.json"
    path.write_text(json.dumps(dict(content, node=REAL, reason=None)))
    scontrol, env = fake_scontrol(tmp_path)
    rc, out = healthcheck(path, "--scontrol", scontrol, env=env)
    assert rc == 1 and "drained" in out, out
    [update] = updates(tmp_path)
    assert update[:3] == ["update", "NodeName=%s" % REAL, "State=DRAIN"]
    assert update[3].startswith("Reason=gds: verdict file not understood: status ") and '"' not in update[3], update
    # drained by us for it, the node stays drained while the file says so: never resumed
    scontrol, env = fake_scontrol(tmp_path, "IDLE+DRAIN", update[3][len("Reason="):])
    rc, out = healthcheck(path, "--scontrol", scontrol, env=env)
    assert rc == 1 and "already drained" in out and len(updates(tmp_path)) == 1, out
    rc, out = healthcheck(path, "--no-drain")
    assert rc == 1 and "verdict file not understood" in out


def test_healthcheck_unknown_status_and_foreign_drains_are_left_alone(tmp_path):
    # the role's own unknown (host unreachable in the run): neither drain nor resume, as the module
    path = verdict_file(tmp_path / "v.json", "good")
    path.write_text(json.dumps({"status": "unknown", "verdict": "UNREACHABLE", "mode": "commission", "node": REAL}))
    scontrol, env = fake_scontrol(tmp_path)
    rc, out = healthcheck(path, "--scontrol", scontrol, env=env)
    assert rc == 0 and "nothing to do" in out and updates(tmp_path) == []
    # a file not understood still never touches someone else's drain
    path.write_text(json.dumps({"status": "BAD", "verdict": "FAIL", "mode": "commission", "node": REAL}))
    scontrol, env = fake_scontrol(tmp_path, "IDLE+DRAIN", "admin: firmware")
    rc, out = healthcheck(path, "--scontrol", scontrol, env=env)
    assert rc == 1 and "drained by someone else" in out and updates(tmp_path) == [], out
    # and a file the role wrote, good, resumes only our own drain
    verdict_file(path, "good")
    scontrol, env = fake_scontrol(tmp_path, "IDLE+DRAIN", "gds: bench: x")
    rc, out = healthcheck(path, "--scontrol", scontrol, env=env)
    assert rc == 0 and "resumed" in out and updates(tmp_path)[-1][2] == "State=RESUME"


# --------------------------------------------------------------------------------------------
# Hostile input against the real Slurm
# --------------------------------------------------------------------------------------------
@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_a_node_an_admin_set_down_is_never_taken_over(slurm, tmp_path):
    # nodes that never register: with ReturnToService=2 a registered slurmd would bring itself back
    down, down_ours, foreign = NODES[3], NODES[4], NODES[5]
    slurm.set_down(down, "admin: PSU replaced")
    slurm.set_down(down_ours, "admin: cable")
    slurm.drain(down_ours, "gds: bench: old")  # ours once, DOWN since: DOWN+DRAIN
    slurm.drain(foreign, "admin: firmware")
    nodes = [down, down_ours, foreign]
    bad = dict((n, ("FAIL", [check("bench: x", "FAIL")])) for n in nodes)
    rc, res = slurm_module(summary_run(tmp_path / "bad", bad), max_drain_percent=100)
    assert rc == 0 and res["commands"] == [] and sorted(i["node"] for i in res["kept"]) == nodes, res
    assert slurm.state(down)[1] == "admin: PSU replaced" and "DOWN" in slurm.state(down)[0]
    assert slurm.state(foreign)[1] == "admin: firmware"
    rc, res = slurm_module(summary_run(tmp_path / "good", passing(*nodes)))
    assert rc == 0 and res["commands"] == [], res
    assert "DOWN" in slurm.state(down)[0] and slurm.state(down)[1] == "admin: PSU replaced"
    assert "DOWN" in slurm.state(down_ours)[0] and "DRAIN" in slurm.state(down_ours)[0]


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_two_hosts_on_one_node_change_nothing(slurm, tmp_path):
    slurm.drain(REAL, "gds: bench: old")
    hosts = {"gpu-a.example.com": ("FAIL", [check("bench: x", "FAIL")]), "gpu-b.example.com": ("PASS", [])}
    run_dir = summary_run(tmp_path / "r", hosts)
    rc, res = slurm_module(run_dir, nodes={"gpu-a.example.com": REAL, "gpu-b.example.com": REAL})
    assert rc != 0 and "gpu-a.example.com" in res["msg"] and "gpu-b.example.com" in res["msg"], res
    assert slurm.state(REAL)[1] == "gds: bench: old"
    hosts = {REAL + ".rack1": ("PASS", []), REAL + ".rack2": ("FAIL", [check("bench: x", "FAIL")])}
    rc, res = slurm_module(summary_run(tmp_path / "s", hosts))
    assert rc != 0 and REAL + ".rack1" in res["msg"] and REAL + ".rack2" in res["msg"], res
    assert slurm.state(REAL)[1] == "gds: bench: old"
    rc, res = slurm_module(summary_run(tmp_path / "t", {"gpu-a": ("FAIL", [check("bench: x", "FAIL")])}),
                           nodes={"gpu-a": "fleet-000[2-3]"})
    assert rc != 0 and "fleet-000[2-3]" in res["msg"] and "Traceback" not in res["msg"]
    assert all("DRAIN" not in slurm.state(n)[0] for n in NODES[1:4])


@pytest.mark.parametrize("content, key", [
    ('{"hosts": {"%s": {"verdict": null}}}' % REAL, 'hosts["%s"].verdict' % REAL),
    ('{"hosts": {"%s": "PASS"}}' % REAL, 'hosts["%s"]' % REAL),
    ('{"hosts": {"%s": {"verdict": "PASS", "checks": [null]}}}' % REAL, 'hosts["%s"].checks[0]' % REAL),
])
@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_a_corrupted_summary_neither_resumes_nor_crashes(slurm, tmp_path, content, key):
    slurm.drain(REAL, "gds: bench: old")
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "summary.json").write_text(content)
    rc, res = slurm_module(str(tmp_path / "r"))
    assert rc != 0 and "summary.json" in res["msg"] and key in res["msg"] and "Traceback" not in res["msg"], res
    assert slurm.state(REAL)[1] == "gds: bench: old"


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_a_corrupted_drift_report_neither_drains_nor_crashes(slurm, tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "drift.json").write_text('{"hosts": {"%s": {"drifted": true, "items": "x"}}}' % REAL)
    rc, res = slurm_module(str(tmp_path / "r"))
    assert rc != 0 and "drift.json" in res["msg"] and 'hosts["%s"].items' % REAL in res["msg"], res
    assert "DRAIN" not in slurm.state(REAL)[0]


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_hostile_reasons_are_escaped_and_a_second_run_changes_nothing(slurm, tmp_path):
    names = HOSTILE_TEXT[:5]
    hosts = dict((node, ("FAIL", [check(name, "FAIL")])) for node, name in zip(NODES, names))
    run_dir = summary_run(tmp_path / "r", hosts)
    rc, res = slurm_module(run_dir, max_drain_percent=100)
    assert rc == 0 and len(res["drain"]) == len(names), res
    for node, name in zip(NODES, names):
        stored = slurm.state(node)[1]
        assert stored == gds_slurm.reason("gds:", name) and stored.isprintable() and "=" not in stored, stored
    rc, res = slurm_module(run_dir, max_drain_percent=100)
    assert rc == 0 and res["commands"] == [] and not res["changed"], res


def test_reason_prefix_is_checked_by_the_module(tmp_path):
    rc, res = slurm_module(summary_run(tmp_path / "r", passing("a")), reason_prefix="gds x")
    assert rc != 0 and "reason_prefix" in res["msg"] and "Traceback" not in res["msg"]


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
@pytest.mark.parametrize("named", ["fleet-000[1-2]", "fleet-0001,fleet-0002", "fleet-0001 fleet-0002",
                                   "fleet-0002", ["fleet-0001"]])
def test_healthcheck_acts_only_on_the_node_it_runs_on(slurm, tmp_path, named):
    path = verdict_file(tmp_path / "v.json", "bad", "gds: bench: x", node=named)
    rc, out = healthcheck(path, env=slurm.env)
    assert rc == 2 and "nothing done" in out and "Traceback" not in out, out
    assert all("DRAIN" not in slurm.state(n)[0] for n in NODES[:3])


@pytest.mark.parametrize("args, env_node", [
    (["--node", "fleet-000[1-2]"], None),
    (["--node", "fleet-0001,fleet-0002"], None),
    (["--node", "fleet-0002"], REAL),          # slurmd says otherwise
    ([], "fleet-000[1-2]"),
])
@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_healthcheck_refuses_a_node_name_that_is_not_this_one_node(slurm, tmp_path, args, env_node):
    path = verdict_file(tmp_path / "v.json", "bad", "gds: bench: x", node=REAL)
    rc, out = healthcheck(path, *args, env=slurm.env, node=env_node)
    assert rc == 2 and "nothing done" in out, out
    assert all("DRAIN" not in slurm.state(n)[0] for n in NODES[:3])


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_healthcheck_asks_the_local_slurmd_which_node_it_is(slurm, tmp_path):
    # no SLURMD_NODENAME, no --node: `scontrol show slurmd` says fleet-0001 (the host is not named so)
    rc, out = healthcheck(verdict_file(tmp_path / "v.json", "bad", "gds: bench: x", node=NODES[1]), env=slurm.env, node=None)
    assert rc == 2 and "is for node %s" % NODES[1] in out and "DRAIN" not in slurm.state(NODES[1])[0], out
    rc, out = healthcheck(verdict_file(tmp_path / "v.json", "bad", "gds: bench: x"), env=slurm.env, node=None)
    assert rc == 1 and slurm.state(REAL)[1] == "gds: bench: x", out


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_healthcheck_uses_node_option_without_slurmd(slurm, tmp_path):
    path = verdict_file(tmp_path / "v.json", "bad", "gds: bench: x", node=REAL)
    rc, out = healthcheck(path, "--node", REAL, env=slurm.env, node=None)
    assert rc == 1 and slurm.state(REAL)[1] == "gds: bench: x", out


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_healthcheck_never_takes_over_a_down_node(slurm, tmp_path):
    node = NODES[3]  # never registers: stays DOWN (a registered slurmd may come back by itself)
    slurm.set_down(node, "admin: PSU replaced")
    rc, out = healthcheck(verdict_file(tmp_path / "v.json", "bad", "gds: bench: x", node=node), env=slurm.env, node=node)
    assert rc == 1 and "left as it is" in out and slurm.state(node)[1] == "admin: PSU replaced", out
    slurm.drain(node, "gds: bench: x")  # ours, but DOWN: a PASS does not bring it back
    rc, out = healthcheck(verdict_file(tmp_path / "v.json", "good", node=node), env=slurm.env, node=node)
    assert rc == 0 and "DOWN" in slurm.state(node)[0] and "DRAIN" in slurm.state(node)[0], out
    slurm.sh("scontrol", "update", "NodeName=%s" % REAL, "State=DRAIN", "Reason=admin: firmware", check=True)
    rc, out = healthcheck(verdict_file(tmp_path / "v.json", "good"), env=slurm.env)
    assert rc == 0 and slurm.state(REAL)[1] == "admin: firmware", out


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
@pytest.mark.parametrize("status", ["good", "bad"])
def test_healthcheck_max_age_never_drains_or_resumes(slurm, tmp_path, status):
    if status == "good":
        slurm.drain(REAL, "gds: bench: old")
    path = verdict_file(tmp_path / "v.json", status, "gds: bench: x")
    old = time.time() - 7200
    os.utime(path, (old, old))
    before = slurm.state(REAL)
    rc, out = healthcheck(path, "--max-age", "1", env=slurm.env)
    assert rc == 1 and "stale" in out and slurm.state(REAL) == before, out
    future = time.time() + 86400  # a file dated ahead is no fresher
    os.utime(path, (future, future))
    rc, out = healthcheck(path, "--max-age", "1", env=slurm.env)
    assert rc == 1 and "stale" in out and slurm.state(REAL) == before, out


@pytest.mark.parametrize("age", ["nan", "-1", "inf", "x"])
def test_healthcheck_refuses_a_bad_max_age(tmp_path, age):
    rc, out = healthcheck(verdict_file(tmp_path / "v.json", "bad", "gds: x"), "--no-drain", "--max-age", age)
    assert rc == 2 and "Traceback" not in out, out


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_healthcheck_follows_the_reason_prefix(slurm, tmp_path):
    path = tmp_path / "v.json"

    def write(status, reason=None, **extra):
        path.write_text(json.dumps(dict({"status": status, "verdict": "FAIL" if status == "bad" else "PASS",
                                         "reason": reason, "node": REAL, "mode": "commission"}, **extra)))
    write("bad", "site-gds: bench: x", reason_prefix="site-gds:")
    rc, out = healthcheck(path, env=slurm.env)
    assert rc == 1 and slurm.state(REAL)[1] == "site-gds: bench: x", out
    write("good", reason_prefix="site-gds:")
    rc, out = healthcheck(path, env=slurm.env)
    assert rc == 0 and "resumed" in out and "DRAIN" not in slurm.state(REAL)[0], out
    # the command line wins; a drain with the default prefix is then someone else's
    slurm.drain(REAL, "gds: bench: y")
    rc, out = healthcheck(path, "--prefix", "site-gds:", env=slurm.env)
    assert rc == 0 and slurm.state(REAL)[1] == "gds: bench: y", out
    write("bad", "bench: z", reason_prefix="bad prefix")
    rc, out = healthcheck(path, env=slurm.env)
    assert rc == 2 and "prefix" in out, out


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_healthcheck_escapes_the_reason_and_sees_its_own_drain(slurm, tmp_path):
    path = verdict_file(tmp_path / "v.json", "bad", "gds: bench: \x1b[31m x Mode=y\nNodeName=fleet-0002 State=IDLE")
    rc, out = healthcheck(path, env=slurm.env)
    stored = slurm.state(REAL)[1]
    assert rc == 1 and stored.isprintable() and "=" not in stored and stored.startswith("gds: bench: "), stored
    assert "\x1b" not in out
    rc, out = healthcheck(path, env=slurm.env)
    assert rc == 1 and "already drained" in out and slurm.state(REAL)[1] == stored, out


# --------------------------------------------------------------------------------------------
# The role: argument specs mirror the defaults; the validate entry point
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("extra, hostvars, named", [
    (["-e", "gds_slurm_reason_prefix='gds x'"], {}, "gds_slurm_reason_prefix"),
    (["-e", "gds_slurm_max_drain_percent=250"], {}, "gds_slurm_max_drain_percent"),
    (["-e", "gds_slurm_max_drain_min=-1"], {}, "gds_slurm_max_drain_min"),
    ([], {"gds_slurm_node_name": "fleet-000[2-3]"}, "gds_slurm_node_name"),
    ([], {"gds_slurm_node_name": "fleet-0002,fleet-0003"}, "gds_slurm_node_name"),
])
@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_slurm_playbook_validates_before_any_change(slurm, tmp_path, extra, hostvars, named):
    hosts = passing(NODES[1])
    hosts[REAL] = ("FAIL", [check("bench: x", "FAIL")])
    rc, out = run_playbook(slurm, tmp_path, summary_run(tmp_path / "run", hosts), *extra, hostvars=hostvars)
    assert rc != 0 and named in out, out
    assert all("DRAIN" not in slurm.state(n)[0] for n in NODES[:4])


def test_healthcheck_refuses_a_verdict_file_with_a_prefix_it_cannot_use(tmp_path):
    # without a valid prefix it cannot mark a drain as its own: nothing done
    (tmp_path / "v.json").write_text(json.dumps({"status": "bad", "reason_prefix": ["gds:"], "node": REAL}))
    rc, out = healthcheck(tmp_path / "v.json", "--no-drain")
    assert rc == 2 and "nothing done" in out and "Traceback" not in out, out


@pytest.mark.parametrize("doc", [{"status": ["bad"], "node": REAL},
                                 {"status": "bad", "verdict": "FAIL", "mode": "commission", "reason": 5, "node": REAL}])
def test_healthcheck_a_verdict_file_of_the_wrong_shape_is_not_understood(tmp_path, doc):
    (tmp_path / "v.json").write_text(json.dumps(doc))
    rc, out = healthcheck(tmp_path / "v.json", "--no-drain")
    assert rc == 1 and "verdict file not understood" in out and "Traceback" not in out, out


@pytest.mark.integration  # a real slurmctld and slurmd, or ansible-playbook
def test_validate_entry_point_checks_the_variables_alone(tmp_path):
    (tmp_path / "play.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.include_role: {name: gds.commission.gds_slurm, tasks_from: validate}\n")
    hosts = {"good": {}, "hostlist": {"gds_slurm_node_name": "gpu[01-02]"}, "prefix": {"gds_slurm_reason_prefix": "a b"}}
    for hostvars in hosts.values():
        hostvars.update(ansible_connection="local", ansible_python_interpreter=sys.executable)
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": hosts}}))
    rc, data, _ = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml")
    stats = data["stats"]
    assert rc != 0 and stats["good"]["failures"] == 0, stats
    assert stats["hostlist"]["failures"] == 1 and stats["prefix"]["failures"] == 1, stats


def test_load_run_reason_of_a_host_the_merge_could_not_read(tmp_path):
    """A merged run's host whose inputs file is missing or partial drains with what was wrong."""
    run = gds_slurm.load_run(summary_run(tmp_path / "r", {
        "n1": ("ERROR", [check("report: host file", "ERROR", "missing")]),
        "n2": ("ERROR", [check("bench: x", "PASS"), check("report: host input", "ERROR", "bench")])}))
    assert run["n1"]["reason"] == "gds: report: host file: missing"
    assert run["n2"]["reason"] == "gds: report: host input: bench"
