"""Report documents: summary.json schema, JUnit XML, self-contained HTML, drift.json."""
import json
import os
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import jsonschema

from ansible.module_utils.gds_report import (
    bar_chart, drift_document, host_document, junit, render_html, summary, write_run,
)
from conftest import ROOT, run_module

SCHEMAS = os.path.join(ROOT, "roles", "gds_report", "files")


def schema(name):
    with open(os.path.join(SCHEMAS, name)) as handle:
        return json.load(handle)


def sample_hosts():
    checks = [
        {"name": "acs: 0000:04:10.0", "verdict": "PASS", "expected": "0x0000", "actual": "0x0000"},
        {"name": "bench: raid1 seq_read: throughput_gib_s", "verdict": "WARN", "expected": ">= 5.4 GiB/s",
         "actual": 5.6, "low": 5.4, "unit": "GiB/s", "detail": "within 5% of the lower bound 5.4"},
        {"name": "bench: raid1 seq_read: io path", "verdict": "FAIL", "expected": "nvfs", "actual": "compat",
         "detail": "nvidia-fs absent"},
        {"name": "bench: raid1 rand_read: <iops>", "verdict": "SKIP", "expected": None, "actual": None},
    ]
    return {"good": {"checks": checks[:2]}, "bad": {"checks": checks}}


def docs_for(hosts, states=None):
    return {h: host_document(h, data, (states or {}).get(h)) for h, data in hosts.items()}


def test_verdicts_and_schema():
    docs = docs_for(sample_hosts(), {"gone": {"unreachable": True, "msg": "ssh: no route"},
                                     "broke": {"broken": True, "failures": [{"task": "Compile", "msg": "cc: not found"}]}})
    docs.update(docs_for({"gone": {}, "broke": {}}, {"gone": {"unreachable": True, "msg": "ssh"},
                                                     "broke": {"broken": True, "failures": [{"task": "Compile", "msg": "x"}]}}))
    summ = summary("run-1", "2026-11-22T03:00:00+00:00", "2026-11-22T03:01:00+00:00", docs)
    jsonschema.validate(summ, schema("summary.schema.json"))
    assert {h: d["verdict"] for h, d in summ["hosts"].items()} == {
        "good": "PASS", "bad": "FAIL", "gone": "UNREACHABLE", "broke": "ERROR"}
    assert summ["counts"] == {"PASS": 1, "FAIL": 1, "ERROR": 1, "UNREACHABLE": 1}


def test_a_host_without_checks_is_an_error():
    assert host_document("h", {}, {})["verdict"] == "ERROR"


def test_junit_parses_with_a_testcase_per_check():
    docs = docs_for(sample_hosts())
    root = ET.fromstring(junit(summary("r", "s", "f", docs)).split("\n", 1)[1])
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    bad = suites["bad"]
    assert bad.get("tests") == "4" and bad.get("failures") == "1" and bad.get("skipped") == "1"
    cases = {c.get("name"): c for c in bad.findall("testcase")}
    assert cases["bench: raid1 seq_read: io path"].find("failure") is not None
    assert "WARN" in cases["bench: raid1 seq_read: throughput_gib_s"].find("system-out").text


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.external = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for key, value in attrs:
            if key in ("src", "href") and value and not value.startswith("#"):
                self.external.append(value)


def test_html_is_self_contained_with_charts_and_escaping():
    hosts = sample_hosts()
    hosts["bad"]["topology"] = {"gpus": [{"index": 0, "bdf": "0000:07:00.0"}],
                                "nvme": [{"name": "nvme0n1", "bdf": "0000:08:00.0", "system": False}],
                                "groups": [{"id": 1, "gpus": [0], "nvme": ["nvme0n1"], "nics": [], "link": "PXB", "numa_node": 0}]}
    hosts["bad"]["arrays"] = [{"device": "/dev/md1", "mount": "/raid1", "members": ["nvme0n1"], "gpus": [0]}]
    docs = docs_for(hosts)
    page = render_html(summary("r", "s", "f", docs), docs)
    parser = _Collector()
    parser.feed(page)
    assert parser.external == []          # nothing to fetch: readable offline
    assert "svg" in parser.tags and "table" in parser.tags
    assert "/raid1 (/dev/md1)" in page and "0x07" in page and "0x08" in page
    assert "&lt;iops&gt;" in page and "<iops>" not in page


def test_bar_chart_draws_bounds():
    svg = bar_chart([{"name": "x", "verdict": "PASS", "actual": 7.0, "low": 5.4, "unit": "GiB/s", "expected": ">= 5.4"}])
    assert svg.count("<line") == 1 and "GiB/s" in svg


def test_drift_document_schema():
    doc = drift_document("r", ["a", "b", "c"], {"a": [{"setting": "acs 0000:39:02.0", "expected": "0x0000", "actual": "0x001d"}]},
                         {"c": {"unreachable": True, "msg": "ssh"}})
    jsonschema.validate(doc, schema("drift.schema.json"))
    assert doc["hosts"]["a"]["drifted"] and doc["hosts"]["b"] == {"drifted": False, "items": []}
    assert doc["hosts"]["c"]["drifted"] is None


def test_write_run_points_latest(tmp_path):
    write_run(str(tmp_path), "r1", {"a.json": "{}"})
    write_run(str(tmp_path), "r2", {"a.json": "{}"})
    assert os.readlink(tmp_path / "latest") == "r2"
    assert not [p for p in os.listdir(tmp_path / "r2") if p.startswith(".")]


def test_module_writes_reports_and_lists_not_pass(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"hosts": {"gone": {"unreachable": True, "msg": "ssh: timeout"}}}))
    rc, result = run_module("gds_report", {
        "reports_dir": str(tmp_path / "reports"), "run_id": "r1", "hosts": sample_hosts(),
        "all_hosts": ["good", "bad", "gone"], "active_hosts": ["good", "bad"], "state_file": str(state)})
    assert rc == 0, result
    assert result["not_pass"] == ["bad", "gone"]
    run_dir = tmp_path / "reports" / "r1"
    assert sorted(os.listdir(run_dir)) == ["bad.json", "gone.json", "good.json", "junit.xml", "report.html", "summary.json"]


def test_module_fails_cleanly_on_a_garbled_state_file(tmp_path):
    state = tmp_path / "state.json"
    state.write_text("{not json")
    rc, result = run_module("gds_report", {"reports_dir": str(tmp_path), "run_id": "r", "all_hosts": ["a"],
                                           "active_hosts": ["a"], "state_file": str(state)})
    assert rc != 0 and str(state) in result["msg"]


def test_concurrent_writers_switch_latest_without_collisions(tmp_path):
    """Runs finishing at once (several controllers, one reports/): every write succeeds and
    latest always ends on one of the runs, never a leftover temporary link."""
    import threading

    errors, barrier = [], threading.Barrier(8)

    def writer(n):
        barrier.wait()
        for i in range(40):
            try:
                write_run(str(tmp_path), "r%d-%d" % (n, i), {"summary.json": "{}"})
            except OSError as exc:
                errors.append(repr(exc))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert os.path.islink(tmp_path / "latest") and os.readlink(tmp_path / "latest").startswith("r")
    assert sorted(p for p in os.listdir(tmp_path) if not p.startswith("r")) == ["latest"]


def test_no_pass_without_a_measurement_in_a_required_area():
    settings = {"name": "acs: 0000:04:10.0", "verdict": "PASS", "expected": "0x0000", "actual": "0x0000"}
    skipped = {"name": "bench: raid1 seq_read: run", "verdict": "SKIP", "expected": None, "actual": None}
    measured = {"name": "bench: raid1 seq_read: run", "verdict": "PASS", "expected": "exit 0", "actual": "exit 0"}
    assert host_document("h", {"checks": [settings]}, {}, ["bench"])["verdict"] == "FAIL"
    doc = host_document("h", {"checks": [settings, skipped]}, {}, ["bench"])
    assert doc["verdict"] == "FAIL" and doc["checks"][-1]["name"] == "bench: measured"
    assert host_document("h", {"checks": [settings, skipped, measured]}, {}, ["bench"])["verdict"] == "PASS"
    # a broken host is ERROR for its own reason, not buried under "not measured"
    broken = host_document("h", {"checks": [settings]}, {"broken": True, "failures": [{"task": "t", "msg": "m"}]}, ["bench"])
    assert broken["verdict"] == "ERROR" and [c["name"] for c in broken["checks"]] == ["acs: 0000:04:10.0", "host: play completed"]
