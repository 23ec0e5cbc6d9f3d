"""The Prometheus textfile of a node: exposition format (checked by promtool), labels, escaping,
atomic writes on the node and in the run directory."""
import datetime
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import pytest

from ansible_collections.gds.commission.plugins.module_utils.fleet.metrics import commission_metrics, drift_metrics, escape_label
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import build_report, host_document
from conftest import run_module
from hostile import HOSTILE, parse_exposition

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(not PROMTOOL, reason="promtool is not installed (Debian's prometheus package; "
                                                         "make test installs it)")

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text):
    """[(name, {label: raw escaped value}, value)] of an exposition text."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        match = SAMPLE.match(line)
        assert match, "not a sample line: %r" % line
        out.append((match.group(1), dict(LABEL.findall(match.group(3) or "")), float(match.group(4))))
    return out


def value(text, name, **labels):
    found = [v for n, ls, v in samples(text) if n == name and all(ls.get(k) == w for k, w in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def promtool_check(text):
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def host_doc():
    checks = [
        {"name": "acs: 0000:04:10.0", "verdict": "PASS", "expected": "0x0000", "actual": "0x0000"},
        {"name": "bench: raid1 seq_read: throughput_gib_s", "verdict": "WARN", "expected": ">= 5.4 GiB/s",
         "actual": 5.6, "low": 5.4, "reference": 6.0, "unit": "GiB/s"},
        {"name": "bench: raid1 seq_read: lat_us.mean", "verdict": "PASS", "expected": "<= 1500 us",
         "actual": 1100.0, "high": 1500.0, "reference": 1200.0, "unit": "us"},
        {"name": "bench: raid2 seq_read: throughput_gib_s", "verdict": "FAIL", "expected": ">= 5.4 GiB/s",
         "actual": 3.1, "low": 5.4, "reference": 6.0, "unit": "GiB/s"},
        {"name": "bench: raid1 seq_read: io path", "verdict": "FAIL", "expected": "nvfs", "actual": "compat"},
        {"name": "cufile: properties.use_poll_mode", "verdict": "SKIP", "expected": None, "actual": None},
    ]
    data = {"checks": checks,
            "arrays": [{"device": "/dev/md1", "mount": "/raid1"}, {"device": "/dev/md2", "mount": "/raid2"}],
            "bench": [{"name": "raid1 seq_read", "cmd": ["gdsbench", "-D", "/raid1/gds-bench", "-d", "3", "-x", "0"]},
                      {"name": "raid2 seq_read", "cmd": ["gdsbench", "-f", "/raid2/gds-bench/gdsbench.0", "-d", "5"]}]}
    return host_document("node1", data, {})


@needs_promtool
def test_commission_textfile_passes_promtool():
    text = commission_metrics(host_doc(), 1795000000.0)
    rc, out = promtool_check(text)
    assert rc == 0 and not out.strip(), out


def test_verdicts_per_node_and_area():
    text = commission_metrics(host_doc(), 1795000000.0)
    assert value(text, "gds_commission_verdict", verdict="FAIL") == 1
    assert value(text, "gds_commission_verdict", verdict="PASS") == 0
    assert value(text, "gds_commission_area_verdict", area="bench", verdict="FAIL") == 1
    assert value(text, "gds_commission_area_verdict", area="acs", verdict="PASS") == 1
    assert value(text, "gds_commission_area_verdict", area="cufile", verdict="SKIP") == 1
    assert value(text, "gds_commission_checks", area="bench", verdict="FAIL") == 2
    assert value(text, "gds_commission_last_run_timestamp_seconds") == 1795000000.0
    assert value(text, "gds_commission_info", version="1.0.0") == 1


def test_each_bench_figure_with_its_thresholds_and_place():
    text = commission_metrics(host_doc(), 0)
    where = dict(bench_job="raid1 seq_read", metric="throughput_gib_s", gpu="3", array="/dev/md1", unit="GiB/s")
    assert value(text, "gds_commission_bench_value", **where) == 5.6
    assert value(text, "gds_commission_bench_threshold_low", **where) == 5.4
    assert value(text, "gds_commission_bench_reference", **where) == 6.0
    assert value(text, "gds_commission_bench_pass", **where) == 1
    lat = dict(bench_job="raid1 seq_read", metric="lat_us.mean")
    assert value(text, "gds_commission_bench_threshold_high", **lat) == 1500.0
    assert not [s for s in samples(text) if s[0] == "gds_commission_bench_threshold_low" and s[1]["metric"] == "lat_us.mean"]
    # never the labels a scrape sets itself (they would be renamed exported_job, exported_instance)
    assert not [s for s in samples(text) if {"job", "instance"} & set(s[1])]
    slow = dict(bench_job="raid2 seq_read", gpu="5", array="/dev/md2")
    assert value(text, "gds_commission_bench_value", **slow) == 3.1
    assert value(text, "gds_commission_bench_pass", **slow) == 0
    # the I/O path is a verdict, not a figure: it is counted, not exported as a value
    assert not [s for s in samples(text) if s[0].startswith("gds_commission_bench_") and s[1].get("metric") == "io path"]


def test_label_values_are_escaped():
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert escape_label("mnt\udcff") == "mnt\ufffd"  # a sysfs byte that is not UTF-8


@needs_promtool
def test_drift_textfile_with_odd_settings_passes_promtool():
    entry = {"drifted": True, "items": [{"setting": 'cufile.json "properties"\\x', "expected": 1, "actual": 2},
                                        {"setting": "acs 0000:39:02.0\nsecond line", "expected": 0, "actual": 29}]}
    text = drift_metrics(entry, 1795000000.0)
    rc, out = promtool_check(text)
    assert rc == 0 and not out.strip(), out
    assert value(text, "gds_commission_drift_items") == 2
    assert value(text, "gds_commission_drift_item", setting='cufile.json \\"properties\\"\\\\x') == 1
    assert value(text, "gds_commission_drift_item", setting="acs 0000:39:02.0\\nsecond line") == 1
    unchecked = drift_metrics({"drifted": None, "items": [], "unreachable": True}, 0)
    assert value(unchecked, "gds_commission_drift_checked") == 0


def test_build_report_puts_a_textfile_per_host_in_the_run_dir():
    hosts = {"a": {"checks": host_doc()["checks"]}, "b": {"checks": [{"name": "bench: x: run", "verdict": "PASS",
                                                                      "expected": 1, "actual": 1}]}}
    files, result = build_report("r1", "2026-11-23T03:00:00+00:00", "2026-11-23T03:10:00+00:00", "commission",
                                 hosts, ["a", "b"], {})
    assert files["a.prom"] == result["metrics"]["a"] and result["metrics_file"] == "gds_commission.prom"
    assert value(files["b.prom"], "gds_commission_verdict", verdict="PASS") == 1
    finished = datetime.datetime(2026, 11, 23, 3, 10, tzinfo=datetime.timezone.utc).timestamp()
    assert value(files["a.prom"], "gds_commission_last_run_timestamp_seconds") == finished
    files, result = build_report("r2", "s", "2026-11-23T03:10:00+00:00", "drift", {}, ["a"], {},
                                 drift={"a": [{"setting": "iommu", "expected": "off", "actual": "on"}]})
    assert result["metrics_file"] == "gds_commission_drift.prom"
    assert value(files["a.drift.prom"], "gds_commission_drift_items") == 1


def test_metrics_module_writes_atomically_and_never_in_check_mode(tmp_path):
    text = commission_metrics(host_doc(), 0)
    target = tmp_path / "var" / "lib" / "prometheus" / "node-exporter"
    rc, result = run_module("gds_metrics", {"dir": str(target), "content": text}, check_mode=True)
    assert rc == 0 and not target.exists()
    rc, result = run_module("gds_metrics", {"dir": str(target), "content": text})
    assert rc == 0 and result["changed"] is False, result
    assert (target / "gds_commission.prom").read_text() == text
    assert os.listdir(target) == ["gds_commission.prom"]  # no temporary file left behind
    assert oct((target / "gds_commission.prom").stat().st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("args, word", [({"name": "../x.prom"}, "name"), ({"name": "metrics.txt"}, "name"),
                                        ({"dir": "relative/dir"}, "dir")])
def test_metrics_module_refuses_bad_names(tmp_path, args, word):
    params = dict({"dir": str(tmp_path), "content": "x 1\n"}, **args)
    rc, result = run_module("gds_metrics", params)
    assert rc != 0 and result["msg"].startswith(word) and "Traceback" not in result["msg"]
    assert os.listdir(tmp_path) == []


NODE_EXPORTER = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.integration  # node_exporter serves the files
@pytest.mark.skipif(not NODE_EXPORTER, reason="node_exporter is not installed (Debian's prometheus-node-exporter; "
                                               "make test installs it)")
def test_node_exporter_serves_both_textfiles(tmp_path):
    """The files as the role leaves them on a node, read by a real node_exporter's textfile
    collector: every series served, no scrape error, the two files side by side."""
    textdir = tmp_path / "node-exporter"
    run_module("gds_metrics", {"dir": str(textdir), "content": commission_metrics(host_doc(), 1795000000.0)})
    drift = drift_metrics({"drifted": True, "items": [{"setting": 'acs "0000:39:02.0"', "expected": 0, "actual": 29}]}, 0)
    run_module("gds_metrics", {"dir": str(textdir), "name": "gds_commission_drift.prom", "content": drift})
    port = free_port()
    proc = subprocess.Popen([NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port, "--collector.disable-defaults",
                             "--collector.textfile", "--collector.textfile.directory=%s" % textdir],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        page = None
        for _ in range(100):  # until it listens (a bounded wait, nothing timed)
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as response:
                    page = response.read().decode()
                break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert page is not None, "node_exporter did not serve: %s" % err.decode()[-2000:]
    assert value(page, "node_textfile_scrape_error") == 0
    assert value(page, "gds_commission_verdict", verdict="FAIL") == 1
    assert value(page, "gds_commission_bench_value", bench_job="raid1 seq_read", metric="throughput_gib_s") == 5.6
    assert value(page, "gds_commission_drift_item", setting='acs \\"0000:39:02.0\\"') == 1
    served = {name for name, _, _ in samples(page) if name.startswith("gds_commission_")}
    assert served == {name for name, _, _ in samples(commission_metrics(host_doc(), 0) + drift)}


# ---- hostile input ---------------------------------------------------------------------------
def hostile_doc():
    """A host document whose every label value is hostile, with figures no float64 holds."""
    checks = [{"name": "bench: %s seq_read: %s" % (text, text), "verdict": "PASS", "expected": text, "actual": 1.0 + i,
               "low": 0.5, "reference": 2.0, "unit": text} for i, text in enumerate(HOSTILE)]
    checks += [{"name": "%s: x" % text, "verdict": "WARN", "expected": 1, "actual": 2} for text in HOSTILE[:5]]
    checks += [{"name": "bench: huge: bytes", "verdict": "PASS", "expected": 1, "actual": 10 ** 400, "low": 1,
                "reference": -(10 ** 400)},
               {"name": "bench: huger: bytes", "verdict": "PASS", "expected": 1, "actual": 10 ** 5000, "high": 1e300},
               {"name": "bench: inf: iops", "verdict": "PASS", "expected": 1, "actual": float("inf"), "low": float("nan")}]
    data = {"checks": checks, "arrays": [{"device": text, "mount": "/%s" % text} for text in HOSTILE],
            "bench": [{"name": "%s seq_read" % text, "cmd": ["gdsbench", "-D", "/%s/x" % text, "-d", text]} for text in HOSTILE]}
    return host_document("node1", data, {})


def test_hostile_label_values_pass_a_strict_parser_and_promtool():
    text = commission_metrics(hostile_doc(), 1795000000.0)
    drift = drift_metrics({"drifted": True, "items": [{"setting": t, "expected": t, "actual": t} for t in HOSTILE]}, 0)
    for textfile in (text, drift):
        parse_exposition(textfile)
        if PROMTOOL:
            rc, out = promtool_check(textfile)
            assert rc == 0 and not out.strip(), out
    series = parse_exposition(text)
    jobs = {dict(k[1])["bench_job"] for k in series if k[0] == "gds_commission_bench_value"}
    assert "esc \\x1b[31mred\\x1b[0m seq_read" in jobs and "nul \\x00 byte seq_read" in jobs
    assert "undecodable \ufffd\ufffd bytes seq_read" in jobs  # bytes that were not UTF-8: U+FFFD
    assert 'quotes " \' ` &quot; seq_read' in jobs and "label {braces} a=\"x\",b=\"y\"} # HELP seq_read" in jobs
    assert max(len(job) for job in jobs) <= 1024  # a long value is cut, distinct values stay distinct
    # every hostile job, and "inf" (+Inf is a float64); "huge" and "huger" hold none: left out, counted
    assert len(jobs) == len(HOSTILE) + 1 and "huge" not in jobs
    assert series[("gds_commission_skipped_samples", ())] == 2
    areas = {dict(k[1])["area"] for k in series if k[0] == "gds_commission_checks"}
    assert "esc \\x1b[31mred\\x1b[0m" in areas


def test_a_figure_beyond_float64_skips_that_sample_only():
    """10**400 is a number Python holds and Prometheus cannot (every value is a float64): that one
    sample is left out and counted, and the rest of the file stands."""
    doc = host_doc()
    doc["checks"].append({"name": "bench: raid1 seq_read: bytes", "verdict": "PASS", "expected": 1,
                          "actual": 10 ** 400, "low": 1, "reference": -(10 ** 400), "area": "bench",
                          "job": "raid1 seq_read", "metric": "bytes"})
    text = commission_metrics(doc, 0)
    series = parse_exposition(text)
    assert series[("gds_commission_skipped_samples", ())] == 2
    assert value(text, "gds_commission_bench_value", bench_job="raid1 seq_read", metric="throughput_gib_s") == 5.6
    assert value(text, "gds_commission_bench_threshold_low", bench_job="raid1 seq_read", metric="bytes") == 1
    assert value(text, "gds_commission_bench_pass", bench_job="raid1 seq_read", metric="bytes") == 1
    assert not [k for k in series if k[0] == "gds_commission_bench_value" and dict(k[1])["metric"] == "bytes"]
    if PROMTOOL:
        rc, out = promtool_check(text)
        assert rc == 0 and not out.strip(), out
    assert "skipped_samples" not in commission_metrics(host_doc(), 0)  # only when something was left out


def test_drift_items_counts_exactly_what_it_writes():
    entry = {"drifted": True, "items": [{"setting": "a"}, {"setting": "a"}, "bare", {"no": "setting"}, 7]}
    text = drift_metrics(entry, 0)
    series = parse_exposition(text)
    written = sorted(dict(k[1])["setting"] for k in series if k[0] == "gds_commission_drift_item")
    assert written == ["", "7", "a", "bare"]
    assert series[("gds_commission_drift_items", ())] == len(written)


def test_readers_find_checks_by_their_keys_not_their_names():
    """Every check carries what it is about as data (area, job, metric, gpu, nic, port ...): the
    metrics, the fleet and history baselines, the HTML tables and the Slurm reason read those keys,
    never a name's words (a job whose name holds ': ' once split wrongly)."""
    import os
    import re
    from conftest import COLLECTION
    from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
    doc = host_doc()
    doc["checks"].append(check("bench: odd: name: with: colons", "PASS", ">= 1", 7.5, low=1.0, unit="GiB/s",
                               job="raid9: a b", metric="throughput_gib_s"))
    text = commission_metrics(doc, 0)
    assert value(text, "gds_commission_bench_value", bench_job="raid9: a b", metric="throughput_gib_s") == 7.5
    fleet = os.path.join(COLLECTION, "plugins", "module_utils", "fleet")
    parsing = re.compile(r"""\[["']name["']\]\s*(\.startswith|\.split|\.rsplit|\[len)|name\.count\(|"rdma: GPU%|"rdma: port %""")
    offenders = [(f, n + 1) for f in sorted(os.listdir(fleet)) if f.endswith(".py")
                 for n, line in enumerate(open(os.path.join(fleet, f))) if parsing.search(line)]
    assert offenders == []


def test_metrics_module_never_writes_through_a_directory_link(tmp_path):
    """The textfile directory's own place holding a link (to /etc, say) is refused naming it;
    nothing is written where it points."""
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    link = tmp_path / "node-exporter"
    link.symlink_to(elsewhere)
    rc, result = run_module("gds_metrics", {"dir": str(link), "content": "gds_up 1\n"})
    assert rc != 0 and "symbolic link, not followed" in result["msg"] and str(link) in result["msg"], result
    assert os.listdir(str(elsewhere)) == []
