"""Report documents: summary.json schema, JUnit XML, self-contained HTML, drift.json; host names
as file names and hostile strings through every writer."""
import copy
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from urllib.parse import unquote
from html.parser import HTMLParser

import jsonschema
import pytest

from ansible_collections.gds.commission.plugins.module_utils.fleet import report as gds_report
from ansible_collections.gds.commission.plugins.module_utils.core.checks import VERDICTS, check, gb_text
from ansible_collections.gds.commission.plugins.module_utils.hw.health import link_checks
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import (
    bar_chart, build_report, drift_document, host_document, host_file_name, json_ready, junit, host_page, summary,
    watch_chart, write_run,
)
from conftest import COLLECTION, ROOT, run_module
from hostile import HOSTILE, parse_exposition, strict_json

PROMTOOL = shutil.which("promtool")

SCHEMAS = os.path.join(COLLECTION, "roles", "gds_report", "files")


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


def host_suites(root, host):
    """{area: testsuite} of one host in a JUnit document (a testsuite per host and area)."""
    out = {}
    for suite in root.iter("testsuite"):
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        if props.get("host") == host:
            out[props["area"]] = suite
    return out


def test_junit_has_a_testsuite_per_area_problems_first_and_runs_folded():
    docs = docs_for(sample_hosts())
    root = ET.fromstring(junit(summary("r", "s", "f", docs)).split("\n", 1)[1])
    bad = host_suites(root, "bad")
    assert sorted(bad) == ["acs", "bench"] and bad["bench"].get("name") == "bad: bench"
    bench = bad["bench"]
    assert (bench.get("tests"), bench.get("failures"), bench.get("errors"), bench.get("skipped")) == ("3", "1", "0", "1")
    cases = {c.get("name"): c for c in bench.findall("testcase")}
    assert cases["bench: raid1 seq_read: io path"].find("failure") is not None
    assert "WARN" in cases["bench: raid1 seq_read: throughput_gib_s"].find("system-out").text
    # a run of SKIP (one reason) is one test case naming its checks
    skipped = [c for c in bench.findall("testcase") if c.find("skipped") is not None]
    assert len(skipped) == 1 and skipped[0].get("name").startswith("bench: 1 SKIP")
    assert skipped[0].find("system-out").text == "bench: raid1 rand_read: <iops>"
    # a run of PASS is one test case: its count, the names inside
    acs = host_suites(root, "good")["acs"]
    (case,) = acs.findall("testcase")
    assert case.get("name") == "acs: 1 PASS" and case.find("system-out").text == "acs: 0000:04:10.0"


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
    files, dummy = build_report("r", "s", "f", "commission", hosts, sorted(hosts), {})
    index = _Collector()
    index.feed(files["report.html"])
    # the index links each host's page, written beside it; a host's page links the index back
    assert index.external == ["bad.html", "good.html"] and all(name in files for name in index.external)
    page = files["bad.html"]
    parser = _Collector()
    parser.feed(page)
    assert parser.external == ["report.html"]  # nothing to fetch: readable offline
    assert "svg" in parser.tags and "table" in parser.tags
    assert "/raid1 (/dev/md1)" in page and "0x07" in page and "0x08" in page
    assert "&lt;iops&gt;" in page and "<iops>" not in page
    assert "bad.html" not in files["report.html"].split("<table id=\"fleet-table\">")[0]  # no host's content on the index


def test_bar_chart_draws_bounds():
    svg = bar_chart([{"name": "x", "verdict": "PASS", "actual": 7.0, "low": 5.4, "unit": "GiB/s", "expected": ">= 5.4"}])
    assert svg.count("<line") == 1 and "GiB/s" in svg


# gds_bench's result for the guide's GPU 12 read of md127 (dcgmi dmon figures; the drives' bytes are
# the job's split over the two members: the guide shows no iostat for this run)
WATCHED = os.path.join(ROOT, "tests", "fixtures", "watch", "dgx2-gpu12-result.json")


def test_watch_chart_draws_limit_gpus_and_drives():
    result = json.load(open(WATCHED))
    svg = watch_chart(result)
    assert 'data-job="nvme23 seq_read non-affine gpu12"' in svg
    # the two GPUs that moved the job's bytes; the 14 that moved under 1 % are summed up in a line
    assert re.findall(r'class="bar gpu-rx" data-gpu="(\d+)"', svg) == ["0", "12"]
    assert "14 other GPUs moved less than 1%" in svg and "rx 5.24 GB, tx 4.71 GB" in svg
    assert "GPU bytes from" in svg and "NVML PCIe byte counters" in svg  # which NVML source counted
    assert re.findall(r'class="bar drive" data-drive="([^"]+)"', svg) == ["nvme2n1", "nvme3n1"]
    assert "3.89 GiB/s = 53% of 7.877 GB/s (the drives&#x27; links)" in svg and "util 100.0%" in svg
    widths = {g: float(w) for g, w in re.findall(r'class="bar gpu-rx" data-gpu="(\d+)" x="\d+" y="\d+" width="([\d.]+)"', svg)}
    assert widths["0"] > widths["12"] > 0  # GPU 0 received the most: the bounce GPU
    docs = docs_for({"h": {"checks": [], "bench": [result]}})
    page = host_page("h", docs["h"], "r")
    assert "Where the bytes went" in page and page.count('class="chart watch"') == 1


def test_watch_chart_says_what_is_unknown_and_skips_what_is_no_figure():
    result = {"name": "j", "record": {"bytes": 10, "throughput_gib_s": 1.0},
              "watch": {"drives_unknown": "no drive known for this job", "gpus": [{"index": 0, "unknown": "not supported"}],
                        "gpus_unknown": None, "limit": {"unknown": "drive vda is not on the PCIe links"}, "fraction": None}}
    svg = watch_chart(result)
    assert "unknown: drive vda is not on the PCIe links" in svg and "unknown: no drive known" in svg
    assert "GPU0: not supported" in svg
    assert "<rect" not in svg
    hostile = {"name": "j", "record": {"bytes": float("nan")}, "watch": {
        "gpus": [{"index": 0, "rx_bytes": -5, "tx_bytes": 10 ** 400}, "x"], "drives": "nope", "limit": [1],
        "fraction": float("inf")}}
    assert watch_chart(hostile) == ""  # nothing that is a figure: nothing drawn
    assert watch_chart({"name": "j"}) == "" and watch_chart({"name": "j", "watch": "x"}) == ""


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
    assert sorted(os.listdir(run_dir)) == ["bad.html", "bad.json", "bad.prom", "gone.html", "gone.json", "gone.prom",
                                           "good.html", "good.json", "good.prom", "junit.xml", "report.html", "summary.json"]


def test_drift_without_the_callbacks_state_checks_no_host(tmp_path):
    """No state file (the gds_commission callback not enabled): nothing recorded the drift items,
    so no host is "not drifted"; each is unchecked with the reason, and the run is not clean."""
    rc, result = run_module("gds_report", {
        "reports_dir": str(tmp_path / "reports"), "run_id": "r1", "mode": "drift", "hosts": sample_hosts(),
        "all_hosts": ["good", "bad"], "active_hosts": ["good", "bad"]})
    assert rc == 0, result
    assert result["drifted"] == ["bad", "good"]
    doc = json.loads((tmp_path / "reports" / "r1" / "drift.json").read_text())
    for entry in doc["hosts"].values():
        assert entry["drifted"] is None and "callback is not enabled" in entry["detail"]


@pytest.mark.parametrize("text", ["{not json", "[]", '{"hosts": []}', '{"hosts": {"a": "x"}}', '{"drift": "x"}'])
def test_module_fails_cleanly_on_a_garbled_state_file(tmp_path, text):
    state = tmp_path / "state.json"
    state.write_text(text)
    rc, result = run_module("gds_report", {"reports_dir": str(tmp_path), "run_id": "r", "all_hosts": ["a"],
                                           "active_hosts": ["a"], "state_file": str(state)})
    assert rc != 0 and str(state) in result["msg"] and "Traceback" not in result["msg"]


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


def test_a_check_variable_is_a_list_or_a_modules_registered_result():
    """A role that registers its module's result under its check variable (gds_rdma_checks) is
    read for the result's checks; a skipped task's result holds none; anything else that is no
    check record is an ERROR of that host, never dropped."""
    rdma = {"name": "rdma: port mlx5_0/1", "verdict": "PASS", "expected": "ACTIVE", "actual": "ACTIVE"}
    acs = {"name": "acs: 0000:04:10.0", "verdict": "PASS", "expected": "0x0000", "actual": "0x0000"}
    inputs = gds_report.host_inputs({
        "gds_rdma_checks": {"changed": False, "checks": [rdma], "drift": []},
        "gds_pcie_acs_checks": [acs],
        "gds_netfs_checks": {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"},
        "gds_cufile_checks": {"failed": True, "msg": "cannot parse /etc/cufile.json"},
        "gds_rdma_bench_result": {"checks": [acs]},  # not a check variable's name: not read
    }, {})
    assert inputs["checks"][:2] == [rdma, acs] and len(inputs["checks"]) == 3
    doc = host_document("h", inputs, {}, [])
    assert doc["verdict"] == "ERROR" and doc["checks"][-1]["verdict"] == "ERROR"
    assert gds_report.host_inputs({"gds_rdma_checks": {"checks": [rdma]}}, {})["checks"] == [rdma]


@pytest.mark.parametrize("actual", [None, float("nan"), "unknown", -1, [1, None], "MISSING"])
def test_a_recorded_pass_of_an_unknown_is_no_pass(actual):
    """What a host recorded passes the rule check() keeps (core/checks.refuse_unknown): a PASS
    whose actual is unknown is SKIP, saying why, and measures nothing."""
    recorded = {"name": "bench: raid1 seq_read: run", "verdict": "PASS", "expected": "exit 0", "actual": actual,
                "detail": "as recorded"}
    if actual == "MISSING":
        del recorded["actual"]
    doc = host_document("h", {"checks": [recorded]}, {}, ["bench"])
    check = doc["checks"][0]
    assert check["verdict"] == "SKIP" and check["detail"].startswith("as recorded; not PASS, unknown: actual")
    assert doc["verdict"] == "FAIL" and doc["checks"][-1]["name"] == "bench: measured"
    # other verdicts stay as recorded
    assert host_document("h", {"checks": [dict(recorded, verdict="FAIL")]}, {})["checks"][0]["verdict"] == "FAIL"


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
    topo = link_topology(bdf, slow)
    checks = [{"name": "acs: x", "verdict": "PASS"}] + link_checks(topo["pcie_links"])
    doc = host_document("h", {"checks": checks, "topology": topo}, {})
    links = {link["bdf"]: link for link in doc["pcie_links"]}
    assert links[bdf]["slow"] == text and links[bdf]["verdict"] == "FAIL"
    assert all(link["slow"] is None and link["verdict"] == "PASS" for b, link in links.items() if b != bdf)
    page = host_page("h", doc, "r")
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
    page = host_page("h", doc, "r")
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
               "detail": "current_link_width unreadable", "bdf": "0000:02:01.0"},
              {"name": "nvme: health nvme0n1", "verdict": "PASS", "expected": "no warning", "actual": "none"}]
    checks += link_checks(topo["pcie_links"])  # the first check of a link judges it
    doc = host_document("h", {"checks": checks, "topology": topo}, {})
    links = {link["bdf"]: link for link in doc["pcie_links"]}
    assert links["0000:03:00.0"]["verdict"] == "PASS" and links["0000:03:00.0"]["slow"] is None
    assert "idle" in links["0000:03:00.0"]["detail"]
    assert links["0000:02:01.0"]["verdict"] == "WARN" and "unreadable" in links["0000:02:01.0"]["detail"]
    # the same GPU judged under load and slow there: FAIL, the check's words
    load = {"name": "pcie: link 0000:03:00.0 under load", "verdict": "FAIL", "expected": "Gen4 x16",
            "actual": "Gen1 x16", "detail": "GPU 0000:03:00.0 at most Gen1 under load (Gen4 supported)",
            "bdf": "0000:03:00.0", "under_load": True}
    doc = host_document("h", {"checks": checks + [load], "topology": topo}, {})
    gpu = [link for link in doc["pcie_links"] if link["bdf"] == "0000:03:00.0"][0]
    assert gpu["verdict"] == "FAIL" and gpu["slow"] == load["detail"]
    page = host_page("h", doc, "r")
    health = page[page.index("<h3>Hardware health</h3>"):]
    assert "nvme: health nvme0n1" in health and "pcie: link 0000:03:00.0 under load" in health


def test_unknown_link_values_warn_and_render():
    topo = link_topology()
    topo["pcie_links"][0].update(current_width=None, current_speed_gts=None, degraded=None,
                                 problem="0000:00:01.0/current_link_speed: Unknown")
    checks = [{"name": "acs: x", "verdict": "PASS"}] + link_checks(topo["pcie_links"])
    doc = host_document("h", {"checks": checks, "topology": topo}, {})
    assert doc["pcie_links"][0]["verdict"] == "WARN" and "Unknown" in doc["pcie_links"][0]["detail"]
    page = host_page("h", doc, "r")
    assert "x? ? GT/s" in page and _slow_rows(page) == []


def test_no_links_no_table():
    doc = host_document("h", {"checks": [{"name": "acs: x", "verdict": "PASS"}], "topology": {"groups": []}}, {})
    assert "pcie_links" not in doc
    assert "PCIe links" not in host_page("h", doc, "r")


def test_link_checks_carry_their_bdf():
    topo = link_topology()
    assert [c["bdf"] for c in link_checks(topo["pcie_links"])] == [link["bdf"] for link in topo["pcie_links"]]


def test_the_report_judges_no_link_itself_and_reads_no_check_name():
    """A link's verdict is its check's, found by the check's ``bdf``: a degraded link without a
    check is SKIP (not judged a second time), and a check is matched by its bdf, not its name."""
    topo = link_topology("0000:04:00.0", (2, 16.0))
    doc = host_document("h", {"checks": [{"name": "acs: x", "verdict": "PASS"}], "topology": topo}, {})
    nvme = [link for link in doc["pcie_links"] if link["bdf"] == "0000:04:00.0"][0]
    assert nvme["verdict"] == "SKIP" and nvme["slow"] is None and "no pcie: link check" in nvme["detail"]
    renamed = [dict(c, name="pcie: the drive's link") for c in link_checks(topo["pcie_links"])]
    doc = host_document("h", {"checks": renamed, "topology": topo}, {})
    nvme = [link for link in doc["pcie_links"] if link["bdf"] == "0000:04:00.0"][0]
    assert nvme["verdict"] == "FAIL" and nvme["slow"] == "NVMe controller 0000:04:00.0 x2 of x4"
    # a check named like a link check but without a bdf judges nothing
    fake = {"name": "pcie: link 0000:04:00.0", "verdict": "PASS", "expected": 1, "actual": 1}
    doc = host_document("h", {"checks": [fake], "topology": topo}, {})
    assert [link["verdict"] for link in doc["pcie_links"] if link["bdf"] == "0000:04:00.0"] == ["SKIP"]


# ---- hostile input: host names as file names, every writer's escaping -------------------------
HOST_NAMES = ["sim-a100", "rack1/sim-a100", "../../outside", "a/../../../b", "..", ".", ".hidden", "x" * 300,
              "x" * 300 + "y", "gpu+01", "gpu=01", "gpu_01", "gpu%2B01", "summary", "Summary", "junit", "drift",
              "gpu 01", "gpu\x1b01", "gpu\x0001", "gpu\udcff01", "g\u00e9pu", "", "-", "~", "a~b", "latest",
              "/etc/passwd", "C:\\x", "name.with.dots", "x" * 150, "x" * 151]


def test_host_names_map_to_plain_unique_file_names():
    stems = [host_file_name(host) for host in HOST_NAMES]
    assert len(set(stems)) == len(stems)  # never two hosts in one file
    for host, stem in zip(HOST_NAMES, stems):
        assert re.fullmatch(r"[A-Za-z0-9_%~-][A-Za-z0-9._%~-]*", stem) and len(stem) <= 150, (host, stem)
        assert stem.lower() not in ("summary", "junit", "report", "drift")
    # a plain name keeps its own name, an odd one is percent-encoded (reversibly)
    assert host_file_name("sim-a100") == "sim-a100" and host_file_name("name.with.dots") == "name.with.dots"
    assert host_file_name("rack1/sim-a100") == "rack1%2Fsim-a100"
    assert (host_file_name("gpu+01"), host_file_name("gpu=01")) == ("gpu%2B01", "gpu%3D01")
    assert host_file_name("x" * 150) == "x" * 150 and host_file_name("x" * 151).startswith("x" * 100)


def _files_under(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


def test_module_writes_every_host_inside_reports_dir(tmp_path):
    """Odd inventory names (a path, ../, 300 characters, control characters) each get their own
    HOST.json, HOST.prom and history file inside reports_dir, and latest is set."""
    reports = tmp_path / "deep" / "reports"
    hosts = {host: {"checks": [{"name": "bench: j: throughput_gib_s", "verdict": "PASS", "expected": ">= 1",
                                "actual": 2.0 + i, "low": 1.0, "unit": "GiB/s"}]}
             for i, host in enumerate(HOST_NAMES)}
    rc, result = run_module("gds_report", {"reports_dir": str(reports), "run_id": "r1", "hosts": hosts,
                                           "all_hosts": HOST_NAMES, "active_hosts": HOST_NAMES})
    assert rc == 0, result
    assert os.readlink(reports / "latest") == "r1"
    assert [p for p in _files_under(tmp_path) if not p.startswith(os.path.join("deep", "reports") + os.sep)] == []
    run = reports / "r1"
    assert len([n for n in os.listdir(run) if n.endswith(".json")]) == len(HOST_NAMES) + 1  # + summary.json
    assert len(os.listdir(reports / "history")) == len(HOST_NAMES) == len(result["history"])
    for host in HOST_NAMES:
        doc = strict_json((run / (host_file_name(host) + ".json")).read_bytes())
        assert doc["host"] == json_ready(host)  # a byte that was not UTF-8 as \\xNN
    summ = strict_json((run / "summary.json").read_bytes())
    assert len(summ["hosts"]) == len(HOST_NAMES) and summ["counts"]["PASS"] == len(HOST_NAMES)


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "..", ".", ".hidden", "latest", "history", "x" * 300, "", "r\n1"])
def test_a_run_id_that_is_no_plain_name_fails_naming_it(tmp_path, run_id):
    rc, result = run_module("gds_report", {"reports_dir": str(tmp_path / "reports"), "run_id": run_id,
                                           "all_hosts": ["a"], "active_hosts": ["a"]})
    assert rc != 0 and result["msg"].startswith("run_id: ") and "Traceback" not in result["msg"]
    assert _files_under(tmp_path) == []
    with pytest.raises(ValueError, match="run id"):
        write_run(str(tmp_path / "reports"), run_id, {"summary.json": "{}"})
    with pytest.raises(ValueError, match="file name"):
        write_run(str(tmp_path / "reports"), "r1", {"../x.json": "{}"})
    assert _files_under(tmp_path) == []


def test_hosts_whose_names_differ_in_odd_characters_keep_their_own_history(tmp_path):
    """gpu+01 and gpu=01 once shared history/gpu_01.json: each was compared with the other's
    figures. Each keeps its own, and a file that names another host is not read as this one's."""
    def run(run_id, figures):
        hosts = {h: {"checks": [{"name": "bench: j: throughput_gib_s", "verdict": "PASS", "expected": ">= 1",
                                 "actual": v, "low": 1.0, "unit": "GiB/s"}]} for h, v in figures.items()}
        rc, result = run_module("gds_report", {"reports_dir": str(tmp_path), "run_id": run_id, "hosts": hosts,
                                               "all_hosts": list(figures), "active_hosts": list(figures)})
        assert rc == 0, result
        summ = strict_json((tmp_path / run_id / "summary.json").read_bytes())
        return {h: {c["name"]: c for c in summ["hosts"][json_ready(h)]["checks"]} for h in figures}
    figures = {"gpu+01": 10.0, "gpu=01": 5.0, "gpu\udcff01": 7.0}  # the last: a byte that is not UTF-8
    run("r1", figures)
    checks = run("r2", figures)
    for host, before in figures.items():
        assert checks[host]["history: j: throughput_gib_s"]["verdict"] == "PASS"
        assert checks[host]["history: j: throughput_gib_s"]["reference"] == before
        assert "history: record" not in checks[host]
    assert sorted(os.listdir(tmp_path / "history")) == ["gpu%2B01.json", "gpu%3D01.json", "gpu%ED%B3%BF01.json"]
    # a history file of another host under this host's name (copied by hand): not this host's figures
    (tmp_path / "history" / "gpu%3D01.json").write_text((tmp_path / "history" / "gpu%2B01.json").read_text())
    checks = run("r3", {"gpu=01": 5.0})
    assert "history: j: throughput_gib_s" not in checks["gpu=01"]
    assert "gpu+01" in checks["gpu=01"]["history: record"]["detail"]


def hostile_hosts():
    """Two hosts whose every string a writer shows is hostile: check names, details, expected
    and actual values, units, mount points, job names, topology names, platform."""
    checks = []
    for i, text in enumerate(HOSTILE):
        checks.append({"name": "bench: %s: throughput_gib_s" % text, "verdict": "WARN", "expected": text,
                       "actual": 1.0 + i, "low": 0.5, "unit": text, "detail": text})
        checks.append({"name": "netfs: %s" % text, "verdict": ["PASS", "FAIL", "SKIP", "ERROR"][i % 4],
                       "expected": text, "actual": {text: [text]}, "detail": text})
    checks += [{"name": "bench: huge: bytes", "verdict": "PASS", "expected": 10 ** 400, "actual": 10 ** 400, "low": 1},
               {"name": "bench: nan: iops", "verdict": "PASS", "expected": 1, "actual": float("nan"), "low": 1.0,
                "high": float("inf")},
               {"name": text_name(), "verdict": "\x1b[31mPASS", "expected": None, "actual": None}, "not a check", None]
    topo = {"gpus": [{"index": 0, "bdf": HOSTILE[7]}], "nvme": [{"name": HOSTILE[0], "bdf": HOSTILE[1], "system": False}],
            "groups": [{"id": HOSTILE[8], "gpus": [0], "nvme": [HOSTILE[0]], "nics": [HOSTILE[9]], "link": HOSTILE[2]}],
            "pcie_links": [{"bdf": HOSTILE[4], "kind": "nvme", "upstream": None, "current_width": 2, "expected_width": 4,
                            "degraded": True, "problem": HOSTILE[0]}]}
    data = {"checks": checks + [{"name": "pcie: link x", "verdict": "FAIL", "expected": 4, "actual": 2,
                                 "detail": HOSTILE[3], "bdf": HOSTILE[4]}],
            "topology": topo, "platform": {"kernel": HOSTILE[5]},
            "arrays": [{"mount": text, "device": text, "members": [HOSTILE[0]]} for text in HOSTILE[:6]],
            "bench": [{"name": text, "cmd": ["gdsbench", "-D", text], "record": {"path": {"mode": text}, "bytes": 10 ** 9,
                                                                                  "throughput_gib_s": 1.0},
                       "watch": {"gpus": [{"index": text, "bdf": text, "rx_bytes": 10 ** 9, "tx_bytes": 1}],
                                 "drives": [{"name": text, "bdf": text, "read_bytes": 10 ** 9, "write_bytes": 0,
                                             "util_pct": text}],
                                 "limit": {"gb_s": 2.0, "bound": text}, "fraction": 0.5, "gpus_unknown": text,
                                 "drives_unknown": text, "cufile": {"buffer_gpus": [text]}}}
                      for text in HOSTILE[:4]],
            "rdma_bench": [{"nic": text, "port": 1, "test": text, "memory": "host", "gbps": 1.0, "reason": text}
                           for text in HOSTILE[:4]]}
    return {"esc\x1b[2Jhost": data, "<b>host</b>\"'": data}


def text_name():
    return "gpu: " + "".join(HOSTILE[:6])


def test_hostile_strings_through_every_writer(tmp_path):
    hosts = hostile_hosts()
    states = {h: {} for h in hosts}
    files, result = build_report("r1", "2026-01-01T00:00:00+00:00", "2026-01-01T01:00:00+00:00", "commission",
                                 hosts, list(hosts), states, history={"runs": {}})
    run_dir = write_run(str(tmp_path), "r1", files)
    raw = {name: (tmp_path / "r1" / name).read_bytes() for name in os.listdir(run_dir)}
    for data in raw.values():
        data.decode("utf-8")  # strict: every file is UTF-8
    # JSON: strict (no NaN, no lone surrogate); the hostile text kept, bytes that were not UTF-8 as \xNN
    summ = strict_json(raw["summary.json"])
    host = summ["hosts"]["esc\x1b[2Jhost"]
    names = [c["name"] for c in host["checks"]]
    assert "netfs: esc \x1b[31mred\x1b[0m" in names and "netfs: undecodable \\xff\\x80 bytes" in names
    assert [c for c in host["checks"] if c["name"] == "bench: nan: iops"][0]["actual"] == "NaN"
    assert "host: check record" in names and all(c["verdict"] in VERDICTS for c in host["checks"])
    for host_name in hosts:
        strict_json(raw[host_file_name(host_name) + ".json"])
    # JUnit: a strict XML parser reads it; control characters shown as escapes
    root = ET.fromstring(raw["junit.xml"])
    suite = host_suites(root, "esc\\x1b[2Jhost")["netfs"]
    # a problem is a test case of its own; the checks of a folded run are named in its system-out
    case_names = [c.get("name") for c in suite.iter("testcase")] + [
        line for c in suite.iter("testcase") for line in (c.findtext("system-out") or "").split("\n")]
    assert "netfs: esc \\x1b[31mred\\x1b[0m" in case_names and "netfs: nul \\x00 byte" in case_names
    assert "netfs: cdata ]]> end" in case_names and "netfs: <script>alert(1)</script>" in case_names
    # HTML: no markup of the data's own (one script, ours, on the index; no event handler; no tag
    # from the data; a link only to a page of the run)
    pages = [raw["report.html"].decode("utf-8")] + [raw[host_file_name(h) + ".html"].decode("utf-8") for h in hosts]
    page = "".join(pages)
    parser = _Strict()
    for one in pages:
        parser.feed(one)
    parser.close()
    assert parser.tags.count("script") == 1 and parser.handlers == []
    assert sorted(unquote(link) for link in parser.external) == sorted(
        ["report.html"] * len(hosts) + [host_file_name(h) + ".html" for h in hosts])
    assert not {"img", "b", "textarea"} & set(parser.tags)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "\x1b" not in page and "\x00" not in page
    assert page.count('class="chart watch"') == 8  # every job's watch of both hosts drawn, its strings escaped
    assert "esc \\x1b[31mred\\x1b[0m" in page
    # Prometheus: the strict parser reads every textfile; the sample beyond a float64 is left out, counted
    for host_name in hosts:
        series = parse_exposition(raw[host_file_name(host_name) + ".prom"].decode("utf-8"))
        assert series[("gds_commission_skipped_samples", ())] >= 1
        assert series[("gds_commission_verdict", (("verdict", "ERROR"),))] == 1
        assert len([k for k in series if k[0] == "gds_commission_bench_value"]) >= len(HOSTILE)
    if PROMTOOL:
        for host_name in hosts:
            proc = subprocess.run([PROMTOOL, "check", "metrics"], input=raw[host_file_name(host_name) + ".prom"],
                                  capture_output=True, timeout=60)
            assert proc.returncode == 0, proc.stdout + proc.stderr
    # history: the hostile figures are kept only where they are numbers a float holds
    assert all(isinstance(v, float) for h in result["history"].values() for run in h for v in run["values"].values())


def test_hostile_drift_document_and_textfile(tmp_path):
    drift = {"a": [{"setting": text, "expected": text, "actual": text} for text in HOSTILE] + ["a bare string", 7],
             "b": "not a list"}
    files, result = build_report("r1", "s", "2026-01-01T01:00:00+00:00", "drift", {}, ["a", "b"], {}, drift=drift)
    write_run(str(tmp_path), "r1", files)
    doc = strict_json((tmp_path / "r1" / "drift.json").read_bytes())
    jsonschema.validate(doc, schema("drift.schema.json"))
    assert doc["hosts"]["b"]["items"] == [{"setting": "not a list", "expected": None, "actual": None}]
    assert doc["hosts"]["b"]["drifted"] is True
    series = parse_exposition(files["a.drift.prom"])
    written = [k for k in series if k[0] == "gds_commission_drift_item"]
    # drift_items counts exactly the settings it writes
    assert series[("gds_commission_drift_items", ())] == len(written) == len(HOSTILE) + 2
    series = parse_exposition(files["b.drift.prom"])
    assert series[("gds_commission_drift_items", ())] == 1


class _Strict(HTMLParser):
    """Tags, event-handler attributes and fetched addresses of a page."""

    def __init__(self):
        super().__init__()
        self.tags, self.handlers, self.external = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for key, value in attrs:
            if key.startswith("on"):
                self.handlers.append((tag, key))
            if key in ("src", "href") and value and not value.startswith("#"):
                self.external.append(value)


def test_report_inputs_have_one_home():
    """The report play's filter and the callback's own report read hosts through the same map;
    the role's defaults are the map's."""
    import yaml
    with open(os.path.join(COLLECTION, "roles", "gds_report", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert defaults["gds_report_check_vars"] == gds_report.CHECK_VARS
    assert defaults["gds_report_required_areas"] == list(gds_report.REQUIRED_AREAS)
    # what a host that sets none is held to (roles/gds_report/vars/main.yml) is the defaults' value
    with open(os.path.join(COLLECTION, "roles", "gds_report", "vars", "main.yml")) as handle:
        unset = yaml.safe_load(handle)
    assert unset == {"__gds_report_%s_default" % name: defaults["gds_report_" + name]
                     for name in ("required_areas", "fleet_tolerance", "history_tolerance")}
    assert set(gds_report.REPORT_VARS.values()) | set(gds_report.REPORT_FACTS.values()) == {
        "arrays", "bench", "rdma_bench", "topology", "platform"}


# --------------------------------------------------------------------------------------------
# One host's odd entry is that host's error, never the report of the others
# --------------------------------------------------------------------------------------------
def full_host(read=10.0):
    """A PASS host with every input the report reads: checks, topology, platform, arrays, bench
    (record and watch), RDMA results."""
    checks = [
        {"name": "acs: 0000:04:10.0", "verdict": "PASS", "expected": "0x0000", "actual": "0x0000"},
        {"name": "bench: raid1 seq_read: throughput_gib_s", "verdict": "PASS", "expected": ">= 5 GiB/s",
         "actual": read, "low": 5.0, "unit": "GiB/s", "reference": 6.0},
        {"name": "pcie: link 0000:07:00.0", "verdict": "PASS", "expected": "x16", "actual": "x16", "bdf": "0000:07:00.0"},
        {"name": "rdma: port mlx5_0/1", "verdict": "PASS", "expected": "ACTIVE", "actual": "ACTIVE"},
    ]
    topology = {
        "gpus": [{"index": 0, "bdf": "0000:07:00.0", "nics": ["mlx5_0"], "nic_link": "PIX"}],
        "nvme": [{"name": "nvme0n1", "bdf": "0000:08:00.0", "system": False, "paths": [{"bdf": "0000:08:00.0"}]}],
        "nics": [{"name": "mlx5_0", "bdf": "0000:09:00.0", "numa_node": 0, "fw_ver": "28.1",
                  "ports": [{"port": 1, "netdev": "ib0", "link_layer": "InfiniBand", "state": "ACTIVE",
                             "phys_state": "LINK_UP", "rate_gbps": 200}]}],
        "groups": [{"id": 1, "gpus": [0], "nvme": ["nvme0n1"], "nics": ["mlx5_0"], "link": "PXB", "numa_node": 0}],
        "pcie_links": [{"bdf": "0000:06:00.0", "upstream": None, "port": "root_port", "current_width": 16,
                        "expected_width": 16, "current_speed_gts": 16.0, "expected_speed_gts": 16.0},
                       {"bdf": "0000:07:00.0", "kind": "gpu", "upstream": "0000:06:00.0", "current_width": 16,
                        "expected_width": 16, "max_width": 16, "current_speed_gts": 16.0, "expected_speed_gts": 16.0}],
        "bridges": [{"bdf": "0000:06:00.0", "port_type": "root_port"}],
        "matrix": {"GPU0": {"mlx5_0": "PIX", "nvme0n1": "PXB"}},
    }
    bench = [{"name": "raid1 seq_read", "cmd": ["gdsbench", "-d", "0", "-D", "/raid1"],
              "record": {"xfer_type": "gpu_direct", "io_type": "read", "threads": 4, "throughput_gib_s": read,
                         "iops": 1000, "bytes": 10 ** 10, "gpu": 0, "lat_us": {"mean": 100.0, "p99": 300.0},
                         "path": {"mode": "nvfs"}},
              "watch": {"fraction": 0.5, "limit": {"gb_s": 20.0, "bound": "the drives' links"},
                        "gpus": [{"index": 0, "bdf": "0000:07:00.0", "rx_bytes": 10 ** 10, "tx_bytes": 10 ** 6,
                                  "source": "NVML"}],
                        "drives": [{"name": "nvme0n1", "bdf": "0000:08:00.0", "read_bytes": 10 ** 10, "write_bytes": 0,
                                    "util_pct": 90.0}],
                        "cufile": {"buffer_gpus": [0]}}}]
    rdma = [{"nic": "mlx5_0", "port": 1, "test": "ib_write_bw", "memory": "host", "gpu": None, "gbps": 190.0,
             "threshold_gbps": 150.0, "verdict": "PASS", "reason": ""},
            {"nic": "mlx5_0", "port": 1, "test": "ib_write_bw", "memory": "cuda", "gpu": 0, "affine": True,
             "gbps": 180.0, "lat_us": 2.5, "threshold_gbps": 150.0, "verdict": "PASS", "reason": ""}]
    return {"checks": checks, "topology": topology, "platform": {"kernel": "6.8"},
            "arrays": [{"device": "/dev/md1", "mount": "/raid1", "members": ["nvme0n1"]}],
            "bench": bench, "rdma_bench": rdma, "reboot_required": False}


def _deep(depth):
    value = []
    for dummy in range(depth):
        value = [value]
    return value


# None, NaN, infinities, a float whose every product overflows, an integer no float holds, text
# where numbers belong, empty and nested odd containers, bytes, tuples, a nesting no repr survives
HOSTILE_VALUES = [None, float("nan"), float("inf"), float("-inf"), 1e307, -1e307, 10 ** 400, "x", "", [], {},
                  [[[[]]]], {"a": {"b": [float("nan"), None]}}, [None], [1e307], {1: 2}, b"\xff", (1, 2), _deep(3000)]


def _paths(value, where=()):
    """Every place in a host's inputs: (path, the value there)."""
    yield where, value
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from _paths(item, where + (key,))


def _put(data, path, value):
    data = copy.deepcopy(data)
    place = data
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return data


def odd_report(odd, tmp_path):
    """A normal host and ``odd`` of one platform (so the fleet checks compare them): the files and
    the summary's hosts, after the odd host's files were read back strictly."""
    hosts = {"n1": full_host(10.0), "odd": odd}
    files, result = build_report("r1", "2026-01-01T00:00:00+00:00", "2026-01-01T01:00:00+00:00", "commission", hosts,
                                 list(hosts), {}, required_areas=("bench",),
                                 fleet={"platforms": dict.fromkeys(hosts, "p"), "min_peers": 1}, history={"runs": {}})
    for name in ("summary.json", "odd.json", "n1.json"):
        strict_json(files[name].encode("utf-8"))
    parse_exposition(files["odd.prom"])
    ET.fromstring(files["junit.xml"].encode("utf-8"))
    parser = _Strict()  # the odd host's page, strictly
    parser.feed(files["odd.html"])
    parser.close()
    assert parser.tags.count("script") == 0 and parser.handlers == []
    return files, result["summary"]["hosts"]


def _judged(entry):
    """A host's verdict and checks but the fleet: checks (the odd host's figure moves the median)."""
    return entry["verdict"], [c for c in entry["checks"] if not c["name"].startswith("fleet: ")]


def _input_error(entry):
    return [c for c in entry["checks"] if c["name"] == "report: host input"]


def test_one_hosts_odd_entry_is_that_hosts_error_in_every_file(tmp_path):
    """A watch fraction of 1e307 (OverflowError) and a record that is no mapping (AttributeError)
    stopped the report of every host: the first is shown as unknown, the second makes its host
    ERROR, named in summary.json, HOST.json, junit.xml and report.html; the others are written."""
    odd = full_host()
    odd["bench"][0]["record"] = "gdsbench: killed"
    big = full_host()
    big["bench"][0]["watch"]["fraction"] = 1e307
    hosts = {"good": full_host(), "odd": odd, "big": big}
    rc, result = run_module("gds_report", {"reports_dir": str(tmp_path), "run_id": "r1", "hosts": hosts,
                                           "all_hosts": list(hosts), "active_hosts": list(hosts)})
    assert rc == 0, result
    run = tmp_path / "r1"
    summ = strict_json((run / "summary.json").read_bytes())
    assert {h: e["verdict"] for h, e in summ["hosts"].items()} == {"good": "PASS", "odd": "ERROR", "big": "PASS"}
    reason = "report: cannot render host input: bench[0].record is 'gdsbench: killed' (str), expected a mapping"
    assert [(c["verdict"], c["actual"], c["detail"]) for c in _input_error(summ["hosts"]["odd"])] == [("ERROR", "bench", reason)]
    # what still reads of the odd host is shown: its checks and topology, not its benchmark records
    odd_doc = strict_json((run / "odd.json").read_bytes())
    assert odd_doc["verdict"] == "ERROR" and "topology" in odd_doc and "bench" not in odd_doc
    assert "bench: raid1 seq_read: throughput_gib_s" in [c["name"] for c in odd_doc["checks"]]
    suites = host_suites(ET.fromstring((run / "junit.xml").read_bytes()), "odd")
    assert sum(int(s.get("errors")) for s in suites.values()) == 1
    assert reason in [e.get("message") for s in suites.values() for e in s.iter("error")][0]
    odd_section = (run / "odd.html").read_text()
    assert html_text(reason) in odd_section and "GPU / NVMe affinity" in odd_section
    big_section = (run / "big.html").read_text()
    assert "GiB/s = unknown of 20.0 GB/s" in big_section and 'class="chart watch"' in big_section


def html_text(text):
    import html
    return html.escape(text, quote=True)


def test_junk_in_any_host_input_is_that_hosts_error_only(tmp_path):
    """Property, without hypothesis: every hostile value at every place of one host's inputs.
    Nothing raises, every file reads back strictly, the other hosts' verdicts and checks are
    unchanged, and the odd host is not PASS where the value is no value of that place's kind
    (unless it records nothing: recorded_nothing). An odd figure or name is shown (as unknown
    where it is no figure) or makes the host ERROR, never another verdict."""
    dummy, base = odd_report(full_host(), tmp_path)
    assert {h: e["verdict"] for h, e in base.items()} == dict.fromkeys(base, "PASS")
    others = {h: _judged(e) for h, e in base.items() if h != "odd"}
    places = [(path, value) for path, value in _paths(full_host()) if path]
    assert len(places) > 100
    for path, normal in places:
        for value in HOSTILE_VALUES:
            where = "%s = %s" % (".".join(map(str, path)), gds_report.short_text(value, 40))
            files, hosts = odd_report(_put(full_host(), path, value), tmp_path)
            assert {h: _judged(e) for h, e in hosts.items() if h != "odd"} == others, where
            odd = hosts["odd"]
            if isinstance(normal, (dict, list)):  # a container the report walks
                # nothing recorded: null, an empty value of the place's type, a mapping with none of
                # the place's keys, and (checks nest in lists: a role's list of lists) a list of nothing
                recorded_nothing = value is None or (type(value) is type(normal) and not value) or (
                    isinstance(value, dict) and isinstance(normal, dict) and not set(value) & set(normal)) or (
                    path[0] == "checks" and isinstance(value, list) and not gds_report.flatten(value))
                if not recorded_nothing:
                    assert odd["verdict"] != "PASS", where
            elif path[0] != "checks":  # a figure or a name the report only shows
                assert odd["verdict"] == "PASS" or _input_error(odd), where
            if odd["verdict"] == "ERROR" and _input_error(odd):
                assert _input_error(odd)[0]["detail"].startswith("report: cannot render host input: "), where


def test_number_helpers_are_total():
    """Every figure a page shows goes through these: no value makes them raise, and what is no
    figure is shown as unknown."""
    for value in HOSTILE_VALUES + [True, object()]:
        for text in (gds_report.table_figure(value), gds_report.figure_text(value), gds_report.share_text(value, 3),
                     gds_report.share_text(3, value), gds_report.link_state(value, value), gb_text(value)):
            assert isinstance(text, str) or isinstance(text, int), (value, text)
        degraded = gds_report.describe_degraded({"current_width": value, "expected_width": 16, "current_speed_gts": value,
                                                 "expected_speed_gts": 16.0}, "GPU")
        assert degraded is None or isinstance(degraded, str)
        if value is not None and value not in (1e307, -1e307):  # the only figures among them
            assert gds_report.table_figure(value) == gds_report.figure_text(value) == gb_text(value) == "unknown", value
    assert gds_report.table_figure(None) == "-" and gds_report.table_figure(3) == 3 and gds_report.table_figure(2.5) == "2.5"
    assert gds_report.share_text(1e307, 1e-300) == "unknown" and gds_report.share_text(1, 0) == "-"
    assert gds_report.link_state(10 ** 400, float("nan")) == "x? ? GT/s" and gds_report.link_state(8, 16.0) == "x8 16.0 GT/s"
    assert gb_text(2e10) == "20.00 GB"


def test_real_topologies_and_bench_results_are_of_the_shape_the_report_reads(sim_node):
    """The shape check makes no normal host ERROR: gds_topology's facts of every fixture and a
    real gdsbench result pass it."""
    for fixture in ("dgx2", "dgx-a100", "hgx-h100", "cloud-vm", "rdma-mix"):
        root = sim_node(fixture, fixture)
        rc, result = run_module("gds_topology", {"sysfs_root": os.path.join(root, "sys"),
                                                 "procfs_root": os.path.join(root, "proc")})
        assert rc == 0, result
        assert gds_report.input_problems({"topology": result["ansible_facts"]["gds_topology"]}) == [], fixture
    assert gds_report.input_problems({"bench": [json.load(open(WATCHED))]}) == []
    assert gds_report.input_problems(full_host()) == []


def test_a_host_variable_that_cannot_be_read_is_that_hosts_error():
    """A template that fails in one host's variables (or checks nested deeper than Python
    recurses) stopped the report play's filter for every host."""
    from ansible_collections.gds.commission.plugins.filter.gds_report_hosts import gds_report_hosts

    class Broken(dict):
        def get(self, name, default=None):
            if name == "gds_bench_checks":
                raise RuntimeError("'undefined_var' is undefined")
            return dict.get(self, name, default)

    hostvars = {"a": {"gds_bench_checks": [full_host()["checks"]], "ansible_facts": {}},
                "b": Broken(gds_bench_checks="{{ undefined_var }}", gds_facts_checks=[full_host()["checks"][0]]),
                "c": {"gds_bench_checks": _deep(5000)}}
    out = gds_report_hosts(["a", "b", "c"], hostvars, gds_report.CHECK_VARS)
    assert out["b"]["input_error"] == "cannot read host variable gds_bench_checks: 'undefined_var' is undefined"
    assert out["c"]["checks"] == [] and "input_error" not in out["a"]
    files, result = build_report("r1", "s", "2026-01-01T00:00:00+00:00", "commission", out, ["a", "b", "c"], {})
    hosts = result["summary"]["hosts"]
    assert hosts["a"]["verdict"] == "PASS" and hosts["b"]["verdict"] == "ERROR" and hosts["c"]["verdict"] == "ERROR"
    assert _input_error(hosts["b"])[0]["detail"] == ("report: cannot render host input: cannot read host variable "
                                                     "gds_bench_checks: 'undefined_var' is undefined")
    assert [c["name"] for c in hosts["b"]["checks"]][0] == "acs: 0000:04:10.0"  # what could be read is kept


def test_every_gpu_at_once_is_shown_against_its_singles_the_shared_link_and_the_host_read(tmp_path):
    """A run of GPUs 0, 1 (affinity group 1) and 4 (group 2) at once on the DGX-2: the report's
    table gives the aggregate, the sum of the singles and their ratio, the limit with the link
    that bounds it, per affinity group and per root port, and the share of the host read."""
    import simtree
    from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
    from ansible_collections.gds.commission.plugins.module_utils.measure.concurrency import (
        ceiling_entry, concurrency_entry, concurrent_limit, parts_of,
    )
    root = simtree.build("dgx2", str(tmp_path / "dgx2"))
    topology, _ = discover(root + "/sys", root + "/proc")
    pair = ["nvme2n1", "nvme3n1"]
    job = {"name": "all GPUs on nvme23 seq_read", "jobs": [
        {"name": "gpu%d nvme23" % g, "gpu": g, "members": pair, "array": "nvme23", "single": "nvme23 gpu%d seq_read" % g}
        for g in (0, 1, 4)]}
    record = {"throughput_gib_s": 7.0, "jobs": [{"throughput_gib_s": 2.4}, {"throughput_gib_s": 2.3}, {"throughput_gib_s": 2.3}]}
    records = {"nvme23 gpu0 seq_read": {"throughput_gib_s": 6.5}, "nvme23 gpu1 seq_read": {"throughput_gib_s": 6.4},
               "nvme23 gpu4 seq_read": {"throughput_gib_s": 6.1}}
    watch = {"limit": concurrent_limit(topology, parts_of(job)), "concurrency": concurrency_entry(job, record, records, topology),
             "ceiling": ceiling_entry(record, "all GPUs on nvme23 seq_read host", {"throughput_gib_s": 7.3}),
             "gpu_shares": [{"index": 0, "bytes": 3, "share": 0.345}, {"index": 1, "bytes": 3, "share": 0.33},
                            {"index": 4, "bytes": None, "share": None, "unknown": "not sampled"}],
             "seconds": 10.0, "window_seconds": 53.0, "outside_io_seconds": 43.0, "drives": []}
    result = {"name": job["name"], "record": record, "watch": watch, "checks": []}
    docs = docs_for({"h": {"checks": [], "topology": topology, "bench": [result]}})
    page = host_page("h", docs["h"], "r")
    table = page[page.index("<h3>Every GPU at once</h3>"):]
    table = table[:table.index("</table>")]
    row = re.search(r'<tr data-job="all GPUs on nvme23 seq_read">(.*?)</tr>', table).group(1)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[1:6] == ["0, 1, 4", "7", "19", "37 %", "7.877"]
    assert cells[6].startswith("a link the GPUs share, NVMe controller 0000:2e:00.0: 3.938 GB/s")
    assert "switch upstream port 0000:32:00.0 15.754 GB/s" in cells[7]
    assert cells[8] == "96 % (all GPUs on nvme23 seq_read host: 7.3 GiB/s)"
    assert cells[9] == "GPU0 34 %, GPU1 33 %, GPU4 unknown"  # what each GPU carried of the job's bytes
    assert "util over the benchmark&#x27;s 10.0 s of I/O; 43.0 s of its processes&#x27; start and stop left out" in page
    assert "per affinity group: affinity group 1</td><td>0, 1</td><td>4.7</td><td>12.9</td>" in table
    assert "per root port: root port 0000:4e:00.0</td><td>4</td>" in table
    # the records table and the job's chart give the host read too
    assert "96 % (all GPUs on nvme23 seq_read host" in page and "measured / host read" in page


def test_every_gpu_at_once_into_host_memory_renders(tmp_path):
    """The concurrent run's read into host memory (no GPU: the host ceiling) on the two-GPU VM:
    seen on the H100 machine as 'report: cannot render host input: ... gpus[0] is None'."""
    import simtree
    from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
    from ansible_collections.gds.commission.plugins.module_utils.measure.concurrency import concurrency_entry
    root = simtree.build("cloud-vm-2gpu", str(tmp_path / "vm"))
    topology, _ = discover(root + "/sys", root + "/proc")
    job = {"name": "all GPUs on own arrays seq_read host", "jobs": [
        {"name": "gpu%d data host" % g, "gpu": None, "array": "data", "single": "data seq_read host"} for g in (0, 1)]}
    record = {"throughput_gib_s": 2.2, "jobs": [{"throughput_gib_s": 1.1}, {"throughput_gib_s": 1.1}]}
    entry = concurrency_entry(job, record, {"data seq_read host": {"throughput_gib_s": 2.1}}, topology)
    assert [(g["key"], g["gpus"]) for g in entry["groups"]] == [("host memory (no GPU)", [])]
    result = {"name": job["name"], "record": record, "watch": {"concurrency": entry}, "checks": []}
    docs = docs_for({"h": {"checks": [check("bench: x: run", "PASS", "exit 0", "exit 0")], "topology": topology,
                           "bench": [result]}})
    assert docs["h"]["verdict"] == "PASS", [c for c in docs["h"]["checks"] if c["verdict"] != "PASS"]
    assert "host memory (no GPU)" in host_page("h", docs["h"], "r")


def test_every_gpu_section_shows_unknowns_and_no_hostile_figure():
    result = {"name": "all", "record": {"throughput_gib_s": 1.0}, "watch": {
        "limit": {"unknown": "the path of gpu0 vda, gpu1 vda: link state unknown at 0000:00:01.0",
                  "shared": [{"element": "0000:00:01.0", "what": "disk controller 0000:00:01.0", "gb_s": None},
                             {"element": "pci0000:00", "what": "root complex (host bridge pci0000:00)", "gb_s": None}]},
        "concurrency": {"aggregate_gib_s": float("nan"), "singles_gib_s": -1, "scaling": float("inf"),
                        "unknown": "no single figure for gpu1 vda", "jobs": [{"gpu": 0}, {"gpu": 1}],
                        "groups": [{"key": "<b>", "gpus": [0], "aggregate_gib_s": 10 ** 400}], "root_ports": "x"},
        "ceiling": {"job": "all host", "unknown": "all host did not complete"}}}
    html_text = gds_report.every_gpu_html([result])
    assert "unknown: the path of gpu0 vda, gpu1 vda" in html_text
    assert "disk controller 0000:00:01.0 (rate unknown); root complex (host bridge pci0000:00) (not modelled)" in html_text
    assert "unknown: no single figure for gpu1 vda" in html_text and "unknown: all host did not complete" in html_text
    assert "nan" not in html_text and "inf" not in html_text and "<b>" not in html_text and "&lt;b&gt;" in html_text
    assert gds_report.every_gpu_html([{"name": "single", "watch": {}}]) == ""


def test_a_drift_run_has_a_page_naming_what_drifted():
    """Drift's HTML view: each host that drifted or was not checked with every setting's expected
    and actual value, escaped; the hosts with nothing drifted one folded line."""
    drift = {"a": [{"setting": "/etc/cufile.json: properties.<script>x</script>", "expected": "16384", "actual": "8192"}],
             "b": [], "c": []}
    states = {"d": {"unreachable": True, "msg": "ssh: timed out"}}
    files, result = build_report("d-1", "s", "f", "drift", {}, ["a", "b", "c", "d"], states, drift=dict(drift, d=[]))
    page = files["report.html"]
    parser = _Strict()
    parser.feed(page)
    parser.close()
    assert "script" not in parser.tags and parser.handlers == [] and parser.external == []
    assert '<h2 id="host-a">' in page and '<h2 id="host-d">' in page and '<h2 id="host-b">' not in page
    assert "properties.&lt;script&gt;x&lt;/script&gt;</td><td>16384</td><td>8192" in page
    assert "2 hosts with nothing drifted" in page and "ssh: timed out" in page
    assert sorted(result["drifted"]) == ["a", "d"]
