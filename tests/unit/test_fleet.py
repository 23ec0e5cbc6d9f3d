"""Fleet-relative checks (each figure against its platform's median in the run) and per-host
history (each figure against the host's last PASS run)."""
import json
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.fleet.report import build_report, fleet_checks, history_update, host_document
from conftest import run_module

READ = "bench: raid1 seq_read: throughput_gib_s"
LAT = "bench: raid1 rand_read: lat_us.p99"


def bench(read, lat=300.0):
    """A host's checks: both figures pass their absolute thresholds (loose on purpose)."""
    return {"checks": [
        {"name": READ, "verdict": "PASS", "expected": ">= 7 GiB/s", "actual": read, "low": 7.0, "unit": "GiB/s"},
        {"name": LAT, "verdict": "PASS", "expected": "<= 600 us", "actual": lat, "high": 600.0, "unit": "us"},
        {"name": "bench: raid1 seq_read: io path", "verdict": "PASS", "expected": "nvfs", "actual": "nvfs"}]}


def report(hosts, platforms, **fleet):
    fleet = dict({"platforms": platforms}, **fleet)
    return build_report("r1", "s", "2026-11-23T03:00:00+00:00", "commission", hosts, sorted(hosts), {}, fleet=fleet)


def checks_of(result, host, prefix):
    return {c["name"]: c for c in result["summary"]["hosts"][host]["checks"] if c["name"].startswith(prefix)}


def test_a_slow_node_above_its_absolute_threshold_warns_against_its_peers():
    hosts = {"n1": bench(10.0), "n2": bench(10.2), "n3": bench(9.9), "n4": bench(10.1), "slow": bench(8.5)}
    files, result = report(hosts, {h: "dgx_a100" for h in hosts})
    fleet = checks_of(result, "slow", "fleet: ")
    check = fleet["fleet: raid1 seq_read: throughput_gib_s"]
    assert check["verdict"] == "WARN"
    assert "8.5 GiB/s" in check["detail"] and "median 10 GiB/s" in check["detail"]
    assert "15%" in check["detail"] and "dgx_a100" in check["detail"]
    assert check["actual"] == 8.5 and check["reference"] == 10.0
    assert result["summary"]["hosts"]["slow"]["verdict"] == "PASS"  # a warning, not a failure
    for host in ("n1", "n2", "n3", "n4"):
        assert {c["verdict"] for c in checks_of(result, host, "fleet: ").values()} == {"PASS"}
    # the I/O path is no figure: never compared
    assert "fleet: raid1 seq_read: io path" not in fleet
    assert "fleet: raid1 seq_read: throughput_gib_s" in files["slow.json"]


def test_for_an_upper_bound_higher_is_worse():
    hosts = {"n1": bench(10, 300.0), "n2": bench(10, 310.0), "n3": bench(10, 290.0), "laggy": bench(10, 360.0)}
    _, result = report(hosts, {h: "dgx_h100" for h in hosts})
    check = checks_of(result, "laggy", "fleet: ")["fleet: raid1 rand_read: lat_us.p99"]
    assert check["verdict"] == "WARN" and "above" in check["detail"]
    fast = checks_of(result, "n3", "fleet: ")["fleet: raid1 rand_read: lat_us.p99"]
    assert fast["verdict"] == "PASS"


def test_tolerance_per_host_and_within_it():
    hosts = {"n1": bench(10.0), "n2": bench(10.0), "n3": bench(10.0), "n4": bench(9.2)}
    _, result = report(hosts, {h: "p" for h in hosts}, tolerance=0.10)
    assert checks_of(result, "n4", "fleet: ")["fleet: raid1 seq_read: throughput_gib_s"]["verdict"] == "PASS"
    _, result = report(hosts, {h: "p" for h in hosts}, tolerance={"n4": 0.05})
    assert checks_of(result, "n4", "fleet: ")["fleet: raid1 seq_read: throughput_gib_s"]["verdict"] == "WARN"


def test_platforms_are_compared_only_with_themselves_and_enough_peers():
    hosts = {"a1": bench(10.0), "a2": bench(10.0), "a3": bench(10.0), "a4": bench(10.0),
             "b1": bench(5.0), "b2": bench(5.0), "b3": bench(5.1)}
    platforms = {"a1": "dgx_a100", "a2": "dgx_a100", "a3": "dgx_a100", "a4": "dgx_a100",
                 "b1": "gh200", "b2": "gh200", "b3": "gh200"}
    _, result = report(hosts, platforms)
    assert checks_of(result, "a1", "fleet: ")["fleet: raid1 seq_read: throughput_gib_s"]["verdict"] == "PASS"
    assert checks_of(result, "b1", "fleet: ") == {}  # 2 peers: fewer than the default 3
    _, result = report(hosts, platforms, min_peers=2)
    assert checks_of(result, "b1", "fleet: ")["fleet: raid1 seq_read: throughput_gib_s"]["verdict"] == "PASS"
    # without a platform (no gds_platform_profile) a host is nobody's peer
    _, result = report(hosts, dict(platforms, b1=None, b2=None, b3=None, a4=None), min_peers=2)
    assert checks_of(result, "b1", "fleet: ") == {} and checks_of(result, "a4", "fleet: ") == {}
    assert checks_of(result, "a1", "fleet: ")["fleet: raid1 seq_read: throughput_gib_s"]["detail"].endswith(
        "on 3 dgx_a100 hosts")


def test_fleet_checks_skip_figures_that_were_not_measured():
    docs = {h: host_document(h, bench(10.0), {}) for h in ("n1", "n2", "n3")}
    docs["n4"] = host_document("n4", {"checks": [{"name": READ, "verdict": "ERROR", "expected": ">= 7", "actual": None,
                                                  "low": 7.0}]}, {})
    out = fleet_checks(docs, {h: "p" for h in docs}, 0.1, min_peers=2)
    assert "n4" not in out and [c["name"] for c in out["n1"]] == ["fleet: raid1 rand_read: lat_us.p99",
                                                                  "fleet: raid1 seq_read: throughput_gib_s"]


# --------------------------------------------------------------------------------------------
# History, through the module (what the role runs)
# --------------------------------------------------------------------------------------------
def run(tmp_path, run_id, hosts, check_mode=False, **extra):
    args = dict({"reports_dir": str(tmp_path / "reports"), "run_id": run_id, "hosts": hosts,
                 "all_hosts": sorted(hosts), "active_hosts": sorted(hosts)}, **extra)
    rc, result = run_module("gds_report", args, check_mode=check_mode)
    assert rc == 0, result
    return result


def test_a_node_that_lost_since_its_last_pass_warns_with_both_figures_and_the_run(tmp_path):
    run(tmp_path, "r1", {"n1": bench(10.0)})
    failing = bench(9.8)
    failing["checks"][2].update(verdict="FAIL", actual="compat")
    run(tmp_path, "r2", {"n1": failing})  # not a PASS: never the reference
    result = run(tmp_path, "r3", {"n1": bench(8.0)})
    checks = checks_of(result, "n1", "history: ")
    check = checks["history: raid1 seq_read: throughput_gib_s"]
    assert check["verdict"] == "WARN" and check["previous_run"] == "r1"
    assert "run r1" in check["detail"] and "10 GiB/s then, 8 GiB/s now" in check["detail"] and "20%" in check["detail"]
    assert checks["history: raid1 rand_read: lat_us.p99"]["verdict"] == "PASS"
    assert result["summary"]["hosts"]["n1"]["verdict"] == "PASS"
    saved = json.loads((tmp_path / "reports" / "history" / "n1.json").read_text())
    assert [r["run_id"] for r in saved["runs"]] == ["r1", "r2", "r3"]
    assert saved["runs"][0]["values"]["raid1 seq_read: throughput_gib_s"] == 10.0


def test_a_last_pass_figure_that_is_no_figure_is_never_the_reference():
    """A history file's figure that is negative (or NaN, text) is no figure to lose against:
    that metric is not compared, never judged PASS."""
    from ansible_collections.gds.commission.plugins.module_utils.fleet.report import history_checks
    doc = host_document("n1", bench(10.0, 300.0), {})
    for value in (-1, -0.5, float("nan"), "unknown", None):
        runs = [{"verdict": "PASS", "run_id": "r1", "values": {"raid1 seq_read: throughput_gib_s": 10.0,
                                                                "raid1 rand_read: lat_us.p99": value}}]
        checks = {c["name"]: c for c in history_checks("n1", doc, runs)}
        assert list(checks) == ["history: raid1 seq_read: throughput_gib_s"], (value, checks)
        assert checks["history: raid1 seq_read: throughput_gib_s"]["verdict"] == "PASS"


def test_history_is_bounded_and_untouched_in_check_mode(tmp_path):
    for i in range(5):
        run(tmp_path, "r%d" % i, {"n1": bench(10.0)}, history_keep=3)
    path = tmp_path / "reports" / "history" / "n1.json"
    assert [r["run_id"] for r in json.loads(path.read_text())["runs"]] == ["r2", "r3", "r4"]
    before = path.read_text()
    result = run(tmp_path, "r9", {"n1": bench(5.0)}, check_mode=True, history_keep=3)
    assert checks_of(result, "n1", "history: ")["history: raid1 seq_read: throughput_gib_s"]["verdict"] == "WARN"
    assert path.read_text() == before and result["history"] == []


def test_an_unreadable_history_warns_naming_the_file_and_is_kept_aside(tmp_path):
    hist = tmp_path / "reports" / "history"
    hist.mkdir(parents=True)
    (hist / "n1.json").write_text("{not json")
    result = run(tmp_path, "r1", {"n1": bench(10.0)})
    check = checks_of(result, "n1", "history: ")["history: record"]
    assert check["verdict"] == "WARN" and str(hist / "n1.json") in check["detail"]
    backups = [p for p in os.listdir(hist) if p.startswith("n1.json.") and p.endswith("~")]
    assert len(backups) == 1 and (hist / backups[0]).read_text() == "{not json"
    assert json.loads((hist / "n1.json").read_text())["runs"][0]["run_id"] == "r1"


def test_a_rerun_of_the_same_run_id_replaces_its_entry():
    doc = host_document("n1", bench(10.0), {})
    runs = history_update([], "r1", "t1", doc)
    runs = history_update(runs, "r1", "t2", doc)
    assert [(r["run_id"], r["finished"]) for r in runs] == [("r1", "t2")]


def test_module_groups_by_platform_option(tmp_path):
    hosts = {"n1": bench(10.0), "n2": bench(10.0), "n3": bench(10.0), "slow": bench(8.0)}
    result = run(tmp_path, "r1", hosts, platforms={h: "dgx_a100" for h in hosts}, history_keep=0)
    assert checks_of(result, "slow", "fleet: ")["fleet: raid1 seq_read: throughput_gib_s"]["verdict"] == "WARN"
    assert not (tmp_path / "reports" / "history").exists()
    doc = json.loads((tmp_path / "reports" / "r1" / "slow.json").read_text())
    assert doc["profile"] == "dgx_a100"


@pytest.mark.parametrize("option, bad", [("fleet_tolerance", "ten"), ("fleet_tolerance", 1.5),
                                         ("history_tolerance", {"n1": -0.1})])
def test_a_bad_tolerance_fails_naming_it(tmp_path, option, bad):
    rc, result = run_module("gds_report", {"reports_dir": str(tmp_path), "run_id": "r", "hosts": {"n1": bench(10.0)},
                                           "all_hosts": ["n1"], "active_hosts": ["n1"], option: bad})
    assert rc != 0 and result["msg"].startswith(option) and "Traceback" not in result["msg"]
    assert not (tmp_path / "r").exists()
