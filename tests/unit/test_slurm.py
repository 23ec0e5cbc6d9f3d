"""gds_slurm and scripts/gds-healthcheck against a real Slurm (Debian slurm-wlm, munge) started
here: one slurmctld, one slurmd registered as fleet-0001, more node names that never register
(UNKNOWN: drain works on them, resume needs a registered node). Skipped, with the reason, where
the daemons cannot start."""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT, run_module

from ansible.module_utils import gds_slurm

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
    def __init__(self, base):
        self.base = str(base)
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
        for sub in ("state", "log", "spool/" + REAL):
            os.makedirs(os.path.join(base, sub), exist_ok=True)
        key = os.path.join(base, "munge.key")
        with open(key, "wb") as handle:
            handle.write(os.urandom(1024))
        os.chmod(key, 0o600)
        sock = os.path.join(base, "munge.sock")
        ctld_port, real_port, dead_port = _free_port(), _free_port(), _free_port()
        host = socket.gethostname()
        with open(self.conf, "w") as handle:
            handle.write("\n".join([
                "ClusterName=gdstest", "SlurmctldHost=%s(127.0.0.1)" % host, "SlurmctldPort=%d" % ctld_port,
                "SlurmdPort=%d" % real_port, "SlurmUser=root", "SlurmdUser=root",
                "AuthType=auth/munge", "CredType=cred/munge", "AuthInfo=socket=%s" % sock,
                "StateSaveLocation=%s/state" % base, "SlurmdSpoolDir=%s/spool/%%n" % base,
                "SlurmctldPidFile=%s/slurmctld.pid" % base, "SlurmdPidFile=%s/slurmd-%%n.pid" % base,
                "SlurmctldLogFile=%s/log/slurmctld.log" % base, "SlurmdLogFile=%s/log/slurmd-%%n.log" % base,
                "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/linear",
                "SchedulerType=sched/builtin", "MpiDefault=none", "ReturnToService=2", "SlurmdTimeout=300",
                "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
                "NodeName=%s NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=1 State=UNKNOWN" % (REAL, host, real_port),
                "NodeName=fleet-[0002-%04d] NodeHostname=%s NodeAddr=127.0.0.1 Port=%d CPUs=1 State=UNKNOWN"
                % (len(NODES), host, dead_port),
                "PartitionName=gds Nodes=ALL Default=YES State=UP", ""]))
        steps = [
            ("munged", ["munged", "-S", sock, "--key-file=" + key, "--log-file=%s/log/munged.log" % base,
                        "--pid-file=%s/munged.pid" % base, "--seed-file=%s/munged.seed" % base], "munged.pid"),
            ("slurmctld", ["slurmctld", "-f", self.conf], "slurmctld.pid"),
            ("slurmd", ["slurmd", "-f", self.conf, "-N", REAL], "slurmd-%s.pid" % REAL),
        ]
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
        if not self._wait(lambda: "UNKNOWN" not in self.state(REAL)[0], timeout=30):
            return "slurmd did not register %s; log:\n%s" % (REAL, _tail(os.path.join(base, "log", "slurmd-%s.log" % REAL)))
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
        self._wait(lambda: os.path.exists(path), timeout=15)
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

    def reset(self):
        """Every node undrained: the registered one resumed, the others back to plain UNKNOWN."""
        for node in NODES:
            flags, _ = self.state(node)
            if "DRAIN" in flags:
                self.sh("scontrol", "update", "NodeName=%s" % node, "State=RESUME" if node == REAL else "State=UNDRAIN")


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
# Reports as module_utils/gds_report writes them
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


def test_node_names_come_from_the_inventory_mapping(slurm, tmp_path):
    hosts = {"gpu-a.example.com": ("FAIL", [check("bench: x", "FAIL")]), "gpu-b": ("PASS", []),
             "fleet-0004.cluster.local": ("PASS", [])}
    rc, res = slurm_module(summary_run(tmp_path / "r", hosts), nodes={"gpu-a.example.com": REAL})
    assert rc == 0, res
    assert res["drain"][0]["node"] == REAL and "DRAIN" in slurm.state(REAL)[0]
    assert res["not_in_slurm"] == [{"host": "gpu-b", "node": "gpu-b"}]  # short name of fleet-0004.cluster.local is known
    assert res["candidates"] == 2


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
def healthcheck(path, *args, env=None):
    proc = subprocess.run([sys.executable, HEALTHCHECK, "--file", str(path)] + list(args), capture_output=True,
                          text=True, env=env, timeout=30)
    return proc.returncode, proc.stdout + proc.stderr


def verdict_file(path, status, reason=None, node=REAL, mode="commission"):
    path.write_text(json.dumps({"status": status, "verdict": "FAIL" if status == "bad" else "PASS",
                                "reason": reason, "node": node, "mode": mode}))
    return path


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
def run_playbook(slurm, tmp_path, run_dir, *extra):
    inventory = tmp_path / "hosts.yml"
    hosts = {REAL: {}, NODES[1]: {}, "gpu-x.example.com": {"gds_slurm_node_name": NODES[2]}}
    for host, hostvars in hosts.items():
        hostvars.update(ansible_connection="local", ansible_python_interpreter=sys.executable,
                        gds_root=str(tmp_path / "nodes" / host))
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))
    env = dict(slurm.env, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), GDS_REPORTS_DIR=str(tmp_path / "reports"))
    proc = subprocess.run([os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", str(inventory),
                           os.path.join(ROOT, "playbooks", "slurm.yml"), "-e", "gds_slurm_run_dir=%s" % run_dir,
                           "-e", "gds_slurm_max_drain_percent=100"] + list(extra),
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


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
    # the node's own health check agrees with the controller: already drained, exit 1
    rc, out = healthcheck(tmp_path / "nodes" / REAL / "var" / "lib" / "gds-commission" / "verdict.json", env=slurm.env)
    assert rc == 1 and "already drained" in out
