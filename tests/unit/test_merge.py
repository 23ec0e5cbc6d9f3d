"""The merge of host files (plugins/module_utils/fleet/merge.py): a run written in host scope, in
slices or host by host, merges into the report a push run over the same hosts writes; a host whose
file is missing, partial, another run's or unreadable is ERROR with the reason, the others are
reported."""
import copy
import json
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.fleet import merge as gds_merge
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import (
    HOST_FILE_CHECK, host_file_name, publish_run, write_run_dir,
)
from conftest import run_module
from hostile import strict_json

STARTED, FINISHED = "2026-11-26T03:00:00+00:00", "2026-11-26T03:20:00+00:00"


def bench(read, verdict="PASS"):
    return [{"name": "acs: bridges", "verdict": "PASS", "expected": 0, "actual": 0},
            {"name": "bench: raid1 seq_read: throughput_gib_s", "verdict": verdict, "expected": ">= 7 GiB/s",
             "actual": read, "low": 7.0, "reference": 10.0, "unit": "GiB/s"}]


def fleet():
    """(hosts, states, platforms): five hosts of one platform (a slow one: a fleet WARN), one of
    another, one unreachable, one broken, one whose record is not a mapping."""
    hosts = {"a%d" % i: {"checks": bench(read), "reboot_required": False}
             for i, read in enumerate((10.0, 10.1, 9.9, 10.05, 8.0))}
    hosts["h1"] = {"checks": bench(20.0), "topology": {"gpus": [{"index": 0, "bdf": "0000:07:00.0"}]}}
    hosts["broke"] = {"checks": bench(9.0)}
    hosts["odd"] = {"checks": bench(10.0), "bench": [{"name": "raid1 seq_read", "record": "gdsbench: killed"}]}
    states = {"gone": {"unreachable": True, "msg": "ssh: no route to host"},
              "broke": {"broken": True, "failures": [{"task": "pcie_acs : Disable ACS", "msg": "bound to vfio-pci"}]}}
    platforms = dict((h, "dgx_a100") for h in hosts if h.startswith("a") or h in ("broke", "odd"))
    platforms["h1"] = "dgx_h100"
    return hosts, states, platforms


ALL = ["a0", "a1", "a2", "a3", "a4", "h1", "gone", "broke", "odd"]
DRIFT = {"a0": [{"setting": "/etc/cufile.json: properties.allow_compat_mode", "expected": "false", "actual": "true"}]}


def push(reports, run_id, mode="commission", tolerance=None, hosts=None):
    data, states, platforms = fleet()
    tolerance = tolerance or {}
    return publish_run(str(reports), run_id, STARTED, FINISHED, mode, hosts or data, ALL, states,
                       drift=DRIFT if mode == "drift" else None, required_areas=["bench"],
                       fleet=dict(platforms=platforms, tolerance=tolerance, min_peers=3),
                       history_keep=20, history_tolerance={})


def host_scope(reports, run_id, hosts, mode="commission", tolerance=None, finished=FINISHED):
    """One run in host scope over ``hosts`` (a slice, or one node), as the gds_report module writes it."""
    data, states, platforms = fleet()
    files, result = gds_merge.host_scope_files(
        run_id, STARTED, finished, mode, dict((h, data[h]) for h in hosts if h in data), hosts,
        dict((h, states[h]) for h in hosts if h in states), drift=DRIFT if mode == "drift" else None,
        required_areas=["bench"], platforms=platforms, fleet_tolerance=tolerance or {}, history_tolerance={},
        fleet_min_peers=3, history_keep=20)
    write_run_dir(str(reports), run_id, files)
    return result


def read(reports, run_id, name):
    return strict_json((reports / run_id / name).read_bytes())


def without_times(doc):
    doc = copy.deepcopy(doc)
    for key in ("started", "finished"):
        doc.pop(key, None)
    return doc


# --------------------------------------------------------------------------------------------
# A merged run is the push run's report
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("slices", [[ALL], [ALL[:4], ALL[4:]], [[h] for h in ALL]], ids=["one", "two", "per-host"])
def test_merged_slices_write_the_push_runs_report(tmp_path, slices):
    pushed, merged = tmp_path / "push", tmp_path / "merged"
    for run_id in ("r1", "r2"):  # twice: the second run's history checks read the first's history
        push(pushed, run_id)
        for part in slices:
            host_scope(merged, run_id, part)
        assert not (merged / run_id / "summary.json").exists()  # host scope writes nothing shared
        result = gds_merge.merge_run(str(merged), run_id, expected=ALL)
        assert result["problems"] == {} and result["refused"] == [] and result["mode"] == "commission"
        assert without_times(read(merged, run_id, "summary.json")) == without_times(read(pushed, run_id, "summary.json"))
        for host in ALL:
            assert read(merged, run_id, host + ".json") == read(pushed, run_id, host + ".json"), host
            assert (merged / run_id / (host + ".prom")).read_text() == (pushed / run_id / (host + ".prom")).read_text()
        assert (merged / run_id / "junit.xml").read_text() == (pushed / run_id / "junit.xml").read_text()
        assert os.readlink(str(merged / "latest")) == run_id
    summ = read(merged, "r2", "summary.json")
    checks = {c["name"]: c for c in summ["hosts"]["a4"]["checks"]}
    assert checks["fleet: raid1 seq_read: throughput_gib_s"]["verdict"] == "WARN"  # the slow one of its platform
    assert checks["history: raid1 seq_read: throughput_gib_s"]["previous_run"] == "r1"
    assert summ["hosts"]["broke"]["verdict"] == "ERROR" and summ["hosts"]["gone"]["verdict"] == "UNREACHABLE"
    assert summ["hosts"]["odd"]["verdict"] == "ERROR"  # its record is no mapping: as in the push run
    assert read(merged, "history", "a4.json") == read(pushed, "history", "a4.json")


def test_a_host_file_holds_what_build_report_needs(tmp_path):
    host_scope(tmp_path, "r1", ["a4", "broke"], tolerance={"a4": 0.2})
    names = sorted(os.listdir(str(tmp_path / "r1")))
    assert names == ["a4.inputs.json", "a4.json", "a4.prom", "broke.inputs.json", "broke.json", "broke.prom"]
    record = read(tmp_path, "r1", "a4.inputs.json")
    assert (record["format"], record["version"], record["run_id"], record["host"], record["mode"]) == (
        gds_merge.FORMAT, gds_merge.VERSION, "r1", "a4", "commission")
    assert record["inputs"]["checks"][1]["actual"] == 8.0 and record["platform"] == "dgx_a100"
    assert record["fleet_tolerance"] == 0.2 and record["report"] == {
        "required_areas": ["bench"], "fleet_min_peers": 3, "history_keep": 20, "check_run": False}
    assert read(tmp_path, "r1", "broke.inputs.json")["state"]["failures"][0]["task"] == "pcie_acs : Disable ACS"
    # its own HOST.json: its checks, no fleet comparison (one host is no fleet)
    assert not [c for c in read(tmp_path, "r1", "a4.json")["checks"] if c["name"].startswith("fleet: ")]
    assert (tmp_path / "r1" / "a4.inputs.json").read_text().count("\n") == 1  # no person reads it: compact


def test_merged_drift_run_is_the_push_runs(tmp_path):
    pushed, merged = tmp_path / "push", tmp_path / "merged"
    push(pushed, "d1", mode="drift")
    host_scope(merged, "d1", ALL[:5], mode="drift")
    host_scope(merged, "d1", ALL[5:], mode="drift")
    result = gds_merge.merge_run(str(merged), "d1", expected=ALL)
    assert result["mode"] == "drift" and result["drifted"] == ["a0", "broke", "gone"]
    assert read(merged, "d1", "drift.json") == read(pushed, "d1", "drift.json")
    assert (merged / "d1" / "a0.drift.prom").read_text() == (pushed / "d1" / "a0.drift.prom").read_text()


def test_a_host_whose_run_kept_no_drift_state_is_not_checked(tmp_path):
    """A node whose run had no gds_commission callback recorded no drift: never "not drifted"."""
    data, _, _ = fleet()
    files, _ = gds_merge.host_scope_files("d1", STARTED, FINISHED, "drift", {"a0": data["a0"]}, ["a0"], {}, drift=None)
    write_run_dir(str(tmp_path), "d1", files)
    host_scope(tmp_path, "d1", ["a1"], mode="drift")
    drift = gds_merge.merge_run(str(tmp_path), "d1")["drift"]["hosts"]
    assert drift["a0"]["drifted"] is None and "callback" in drift["a0"]["detail"]
    assert drift["a1"]["drifted"] is False


def test_the_merged_run_spans_its_hosts_runs(tmp_path):
    host_scope(tmp_path, "r1", ["a0"], finished="2026-11-26T05:00:00+02:00")  # 03:00 UTC
    host_scope(tmp_path, "r1", ["a1"], finished="2026-11-26T03:30:00+00:00")
    gds_merge.merge_run(str(tmp_path), "r1")
    summ = read(tmp_path, "r1", "summary.json")
    assert (summ["started"], summ["finished"]) == (STARTED, "2026-11-26T03:30:00+00:00")


# --------------------------------------------------------------------------------------------
# Host files the merge cannot use: ERROR for that host, the others reported
# --------------------------------------------------------------------------------------------
def spoil(path, how):
    if how == "missing":
        path.unlink()
    elif how == "cut short":
        path.write_bytes(path.read_bytes()[:200])
    elif how == "another run":
        record = json.loads(path.read_text())
        record["run_id"] = "r0"
        path.write_text(json.dumps(record))
    elif how == "version 2":
        record = json.loads(path.read_text())
        record["version"] = 2
        path.write_text(json.dumps(record))
    elif how == "a bad tolerance":
        record = json.loads(path.read_text())
        record["fleet_tolerance"] = 5
        path.write_text(json.dumps(record))
    elif how == "another host's":
        record = json.loads(path.read_text())
        record["host"] = "a0"
        path.write_text(json.dumps(record))
    elif how == "not UTF-8":
        path.write_bytes(b"\xff\xfe" + path.read_bytes())
    elif how == "a link":
        target = path.parent.parent / "elsewhere.json"
        target.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(target)
    elif how == "a directory":
        path.unlink()
        path.mkdir()
    elif how == "a list":
        path.write_text("[]")


SPOILED = {"missing": ("missing", "no "), "cut short": ("partial", "not whole JSON"),
           "another run": ("another run", "from run 'r0'"), "version 2": ("partial", "version 2"),
           "a bad tolerance": ("partial", "fleet_tolerance is 5"), "another host's": ("partial", "host 'a0'"),
           "not UTF-8": ("unreadable", "not UTF-8"), "a link": ("unreadable", "is a link"),
           "a directory": ("unreadable", "is a directory"), "a list": ("partial", "not an object")}


@pytest.mark.parametrize("how", sorted(SPOILED))
def test_a_host_file_it_cannot_use_is_that_hosts_error(tmp_path, how):
    host_scope(tmp_path, "r1", ["a0", "a1", "a2", "a3"])
    spoil(tmp_path / "r1" / "a1.inputs.json", how)
    result = gds_merge.merge_run(str(tmp_path), "r1", expected=["a0", "a1", "a2", "a3"])
    problem, words = SPOILED[how]
    assert words in result["problems"]["a1"], result["problems"]
    summ = read(tmp_path, "r1", "summary.json")
    bad = summ["hosts"]["a1"]
    assert bad["verdict"] == "ERROR" and bad["checks"] == [{
        "name": HOST_FILE_CHECK, "verdict": "ERROR", "expected": "the host's inputs file of this run",
        "actual": problem, "detail": result["problems"]["a1"], "area": "report"}]
    assert {h: summ["hosts"][h]["verdict"] for h in ("a0", "a2", "a3")} == {"a0": "PASS", "a2": "PASS", "a3": "PASS"}
    assert "a1" not in os.listdir(str(tmp_path / "history")) and not (tmp_path / "history" / "a1.json").exists()
    if how == "a link":  # read through nothing: the file it points at is left alone
        assert (tmp_path / "elsewhere.json").exists()


def test_a_drift_host_whose_file_cannot_be_used_is_not_checked(tmp_path):
    host_scope(tmp_path, "d1", ["a0", "a1"], mode="drift")
    spoil(tmp_path / "d1" / "a1.inputs.json", "cut short")
    drift = gds_merge.merge_run(str(tmp_path), "d1", expected=["a0", "a1", "a2"])["drift"]["hosts"]
    assert drift["a1"]["drifted"] is None and drift["a1"]["error"] and "not whole JSON" in drift["a1"]["detail"]
    assert drift["a2"]["drifted"] is None and "no " in drift["a2"]["detail"]
    assert drift["a0"]["drifted"] is True


def test_files_of_hosts_not_expected_are_reported_and_nameless_ones_noted(tmp_path):
    host_scope(tmp_path, "r1", ["a0", "a1"])
    (tmp_path / "r1" / "x~0123.inputs.json").write_text("{")
    (tmp_path / "r1" / "rack1%2Fn1.inputs.json").write_text("{")
    result = gds_merge.merge_run(str(tmp_path), "r1", expected=["a0"])
    assert result["hosts"] == ["a0", "a1", "rack1/n1"]
    assert "not whole JSON" in result["problems"]["rack1/n1"]
    assert len(result["notes"]) == 1 and "x~0123.inputs.json" in result["notes"][0]


def test_modes_that_disagree_need_the_mode_named(tmp_path):
    host_scope(tmp_path, "r1", ["a0"])
    host_scope(tmp_path, "r1", ["a1"], mode="drift")
    with pytest.raises(gds_merge.MergeError, match="several modes"):
        gds_merge.merge_run(str(tmp_path), "r1")
    assert not (tmp_path / "r1" / "summary.json").exists()
    result = gds_merge.merge_run(str(tmp_path), "r1", mode="commission")
    assert "drift run" in result["problems"]["a1"] and result["summary"]["hosts"]["a0"]["verdict"] == "PASS"


def test_nothing_to_merge_is_an_error_not_an_empty_report(tmp_path):
    with pytest.raises(gds_merge.MergeError, match="no run directory"):
        gds_merge.merge_run(str(tmp_path), "r1")
    (tmp_path / "r1").mkdir()
    with pytest.raises(gds_merge.MergeError, match="no host file"):
        gds_merge.merge_run(str(tmp_path), "r1")
    with pytest.raises(gds_merge.MergeError, match="plain name"):
        gds_merge.merge_run(str(tmp_path), "../r1")
    # the hosts it expected are reported, each ERROR: a run whose nodes all failed to write
    result = gds_merge.merge_run(str(tmp_path), "r2", expected=["a0", "a1"])
    assert result["not_pass"] == ["a0", "a1"] and "no run directory" in result["problems"]["a0"]


def test_host_names_ending_in_inputs_never_take_another_hosts_file():
    assert host_file_name("a.inputs") != "a.inputs" and host_file_name("a.inputs") + ".json" != "a.inputs.json"
    assert gds_merge.inputs_file_name("a") == "a.inputs.json"
    assert host_file_name("A.INPUTS") == "A%2EINPUTS" and gds_merge._host_of_stem("A%2EINPUTS") == "A.INPUTS"


def test_the_module_merges_and_fails_naming_the_run(tmp_path):
    host_scope(tmp_path, "r1", ["a0", "a4"])
    rc, result = run_module("gds_merge", {"reports_dir": str(tmp_path), "run_id": "r1", "hosts": ["a0", "a4", "a9"]})
    assert rc == 0 and result["not_pass"] == ["a9"] and "a9" in result["problems"] and "metrics" not in result
    assert result["run_dir"] == str(tmp_path / "r1") and result["changed"] is False
    rc, result = run_module("gds_merge", {"reports_dir": str(tmp_path), "run_id": "nothing-here"})
    assert rc != 0 and "cannot merge run nothing-here: no run directory" in result["msg"]


def test_merging_a_run_again_writes_the_same_report(tmp_path):
    """A merge run twice (a retried job step) writes the same files, and the history holds the run once."""
    host_scope(tmp_path, "r1", ["a0", "a1", "a2", "a3"])
    gds_merge.merge_run(str(tmp_path), "r1")
    first = dict((name, (tmp_path / "r1" / name).read_bytes()) for name in sorted(os.listdir(str(tmp_path / "r1"))))
    history = (tmp_path / "history" / "a0.json").read_bytes()
    gds_merge.merge_run(str(tmp_path), "r1")
    again = dict((name, (tmp_path / "r1" / name).read_bytes()) for name in sorted(os.listdir(str(tmp_path / "r1"))))
    assert sorted(again) == sorted(first)
    assert [name for name in first if again[name] != first[name]] == []
    assert (tmp_path / "history" / "a0.json").read_bytes() == history
