"""Report documents: summary.json schema, JUnit XML, self-contained HTML, drift.json."""
import json
import os
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import jsonschema
import pytest

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
    assert sorted(os.listdir(run_dir)) == ["bad.json", "bad.prom", "gone.json", "gone.prom", "good.json", "good.prom",
                                           "junit.xml", "report.html", "summary.json"]


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


# ---- PCIe links: one affinity group behind a switch, one drive on a root port of its own ------
# 00:01.0 root port -> 01:00.0 switch upstream -> 02:00.0 -> GPU 03:00.0
#                                              -> 02:01.0 -> NVMe 04:00.0 (nvme0n1)
# 00:02.0 root port -> NVMe 05:00.0 (nvme1n1, the system drive, in no group)
def _link(bdf, kind, upstream, cur, mx, exp):
    (cw, cs), (mw, ms), (ew, es) = cur, mx, exp
    return {"bdf": bdf, "kind": kind, "upstream": upstream, "current_width": cw, "current_speed_gts": cs,
            "max_width": mw, "max_speed_gts": ms, "expected_width": ew, "expected_speed_gts": es,
            "degraded": cw < ew or cs < es, "problem": None}


def link_topology(slow_bdf=None, slow=None):
    """The tree above at full rate, or with the link of ``slow_bdf`` trained at ``slow`` (width, GT/s)."""
    full = {"0000:00:01.0": ("bridge", None, (16, 16.0)), "0000:01:00.0": ("bridge", "0000:00:01.0", (16, 16.0)),
            "0000:02:00.0": ("bridge", "0000:01:00.0", (16, 16.0)), "0000:03:00.0": ("gpu", "0000:02:00.0", (16, 16.0)),
            "0000:02:01.0": ("bridge", "0000:01:00.0", (4, 16.0)), "0000:04:00.0": ("nvme", "0000:02:01.0", (4, 16.0)),
            "0000:00:02.0": ("bridge", None, (4, 8.0)), "0000:05:00.0": ("nvme", "0000:00:02.0", (4, 8.0))}
    links = [_link(bdf, kind, up, slow if bdf == slow_bdf else best, best, best)
             for bdf, (kind, up, best) in sorted(full.items())]
    return {"gpus": [{"index": 0, "bdf": "0000:03:00.0"}],
            "nvme": [{"name": "nvme0n1", "bdf": "0000:04:00.0", "system": False,
                      "paths": [{"name": "nvme0n1", "bdf": "0000:04:00.0"}]},
                     {"name": "nvme1n1", "bdf": "0000:05:00.0", "system": True}],
            "groups": [{"id": 1, "gpus": [0], "nvme": ["nvme0n1"], "nics": [], "link": "PXB", "numa_node": 0}],
            "bridges": [{"bdf": "0000:00:01.0", "port_type": "root_port"}, {"bdf": "0000:01:00.0", "port_type": "upstream"},
                        {"bdf": "0000:02:00.0", "port_type": "downstream"}, {"bdf": "0000:02:01.0", "port_type": "downstream"}],
            "pcie_links": links}


def _slow_rows(page):
    return [row for row in page.split("<tr") if row.startswith(' class="slow"')]


@pytest.mark.parametrize("bdf, slow, text", [
    ("0000:04:00.0", (2, 16.0), "NVMe controller 0000:04:00.0 x2 of x4"),
    ("0000:02:01.0", (4, 8.0), "switch downstream port 0000:02:01.0 8.0 GT/s of 16.0 GT/s"),
    ("0000:01:00.0", (8, 16.0), "switch upstream port 0000:01:00.0 x8 of x16"),
    ("0000:00:01.0", (8, 5.0), "root port 0000:00:01.0 x8 of x16, 5.0 GT/s of 16.0 GT/s"),
    ("0000:00:02.0", (1, 8.0), "root port 0000:00:02.0 x1 of x4"),
])
def test_degraded_hop_is_named_and_highlighted(bdf, slow, text):
    doc = host_document("h", {"checks": [{"name": "acs: x", "verdict": "PASS"}], "topology": link_topology(bdf, slow)}, {})
    links = {link["bdf"]: link for link in doc["pcie_links"]}
    assert links[bdf]["slow"] == text and links[bdf]["verdict"] == "FAIL"
    assert all(link["slow"] is None and link["verdict"] == "PASS" for b, link in links.items() if b != bdf)
    page = render_html(summary("r", "s", "f", {"h": doc}), {"h": doc})
    rows = _slow_rows(page)
    assert len(rows) == 1 and bdf in rows[0] and text in rows[0]
    assert "degraded: %s" % text in page


def test_link_table_per_group_from_root_port_down():
    doc = host_document("h", {"checks": [{"name": "acs: x", "verdict": "PASS"}], "topology": link_topology()}, {})
    links = {link["bdf"]: link for link in doc["pcie_links"]}
    assert links["0000:01:00.0"]["groups"] == [1] and links["0000:05:00.0"]["groups"] == []
    assert links["0000:01:00.0"]["role"] == "switch upstream port" and links["0000:03:00.0"]["role"] == "GPU"
    # a link's own port type wins; without one, a bridge with no upstream port is a root port
    topo = link_topology()
    topo["bridges"] = []
    topo["pcie_links"][2]["port"] = "upstream"  # 0000:01:00.0
    roles = {link["bdf"]: link["role"] for link in host_document("h", {"checks": [], "topology": topo}, {})["pcie_links"]}
    assert roles["0000:01:00.0"] == "switch upstream port" and roles["0000:00:01.0"] == "root port"
    assert roles["0000:02:00.0"] == "bridge"
    page = render_html(summary("r", "s", "f", {"h": doc}), {"h": doc})
    group = page[page.index("<h4>group 1</h4>"):page.index("<h4>in no group</h4>")]
    order = ["0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:02:01.0", "0000:04:00.0"]
    assert [group.index(b) for b in order] == sorted(group.index(b) for b in order)
    assert "0000:05:00.0" not in group and "0000:05:00.0" in page[page.index("<h4>in no group</h4>"):]
    assert "x16 16.0 GT/s" in group and _slow_rows(page) == []
    # HOST.json carries the links
    assert json.loads(json.dumps(doc))["pcie_links"][0]["bdf"] == "0000:00:01.0"


def test_link_verdict_comes_from_its_check_and_idle_gpu_speed_is_not_a_failure():
    topo = link_topology("0000:03:00.0", (16, 2.5))  # GPU idle at Gen1, full width
    checks = [{"name": "pcie: link 0000:02:01.0", "verdict": "WARN", "expected": "x4", "actual": "unknown",
               "detail": "current_link_width unreadable"},
              {"name": "nvme: health nvme0n1", "verdict": "PASS", "expected": "no warning", "actual": "none"}]
    doc = host_document("h", {"checks": checks, "topology": topo}, {})
    links = {link["bdf"]: link for link in doc["pcie_links"]}
    assert links["0000:03:00.0"]["verdict"] == "PASS" and links["0000:03:00.0"]["slow"] is None
    assert "idle" in links["0000:03:00.0"]["detail"]
    assert links["0000:02:01.0"]["verdict"] == "WARN" and "unreadable" in links["0000:02:01.0"]["detail"]
    # the same GPU judged under load and slow there: FAIL, the check's words
    load = {"name": "pcie: link 0000:03:00.0 under load", "verdict": "FAIL", "expected": "Gen4 x16",
            "actual": "Gen1 x16", "detail": "GPU 0000:03:00.0 at most Gen1 under load (Gen4 supported)"}
    doc = host_document("h", {"checks": checks + [load], "topology": topo}, {})
    gpu = [link for link in doc["pcie_links"] if link["bdf"] == "0000:03:00.0"][0]
    assert gpu["verdict"] == "FAIL" and gpu["slow"] == load["detail"]
    page = render_html(summary("r", "s", "f", {"h": doc}), {"h": doc})
    health = page[page.index("<h3>Hardware health</h3>"):]
    assert "nvme: health nvme0n1" in health and "pcie: link 0000:03:00.0 under load" in health


def test_unknown_link_values_warn_and_render():
    topo = link_topology()
    topo["pcie_links"][0].update(current_width=0, current_speed_gts=None, degraded=None,
                                 problem="0000:00:01.0/current_link_speed: Unknown")
    doc = host_document("h", {"checks": [{"name": "acs: x", "verdict": "PASS"}], "topology": topo}, {})
    assert doc["pcie_links"][0]["verdict"] == "WARN" and "Unknown" in doc["pcie_links"][0]["detail"]
    page = render_html(summary("r", "s", "f", {"h": doc}), {"h": doc})
    assert "x? ? GT/s" in page and _slow_rows(page) == []


def test_no_links_no_table():
    doc = host_document("h", {"checks": [{"name": "acs: x", "verdict": "PASS"}], "topology": {"groups": []}}, {})
    assert "pcie_links" not in doc
    assert "PCIe links" not in render_html(summary("r", "s", "f", {"h": doc}), {"h": doc})
