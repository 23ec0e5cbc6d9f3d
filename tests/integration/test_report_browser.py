"""report.html renders in a real browser (headless Chromium), offline."""
import json
import os
import struct
import subprocess

import pytest

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import build_report, host_document, host_page, render_html, summary
from conftest import ROOT
from devtools import BROWSER, DevTools


@pytest.mark.skipif(not BROWSER, reason="chromium is not installed (make test installs Debian's chromium)")
def test_report_renders_to_a_screenshot(tmp_path):
    checks = [{"name": "bench: raid1 seq_read: throughput_gib_s", "verdict": "PASS", "expected": ">= 5.4 GiB/s",
               "actual": 6.5, "low": 5.4, "unit": "GiB/s"},
              {"name": "acs: 0000:04:10.0", "verdict": "FAIL", "expected": "0x0000", "actual": "0x001d"}]
    docs = {"node1": host_document("node1", {"checks": checks}, {})}
    page = tmp_path / "report.html"
    page.write_text(render_html(summary("r1", "s", "f", docs), docs))
    png = tmp_path / "report.png"
    proc = subprocess.run([os.path.join(ROOT, "scripts", "screenshot-report.sh"), str(page), str(png), "900", "700"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (900, 700)
    assert len(data) > 10000  # a blank page compresses to a few hundred bytes


# --------------------------------------------------------------------------------------------
# The fleet page at 256 nodes, driven in Chromium over the DevTools protocol
# --------------------------------------------------------------------------------------------
PLATFORMS = (("dgx_a100", 128), ("dgx_h100", 96), ("gh200", 32))


def fleet_hosts():
    """256 nodes on three platforms: some FAIL, some broken or unreachable, a few slow ones that
    pass their absolute threshold but trail their platform."""
    hosts, platforms, states = {}, {}, {}
    index = 0
    for platform, count in PLATFORMS:
        for _ in range(count):
            index += 1
            name = "node%03d" % index
            read = 10.0 if index % 29 else 8.0
            checks = [{"name": "bench: raid1 seq_read: throughput_gib_s", "verdict": "PASS", "expected": ">= 7 GiB/s",
                       "actual": read, "low": 7.0, "unit": "GiB/s"},
                      {"name": "acs: 0000:04:10.0", "verdict": "FAIL" if index % 17 == 0 else "PASS",
                       "expected": "0x0000", "actual": "0x001d" if index % 17 == 0 else "0x0000"}]
            hosts[name], platforms[name] = {"checks": checks}, platform
            if index % 41 == 0:
                states[name] = {"unreachable": True, "msg": "ssh: connect to host %s: timed out" % name}
            elif index % 53 == 0:
                states[name] = {"broken": True, "failures": [{"task": "Compile gdsbench", "msg": "cc: not found"}]}
    return hosts, platforms, states


@pytest.fixture(scope="module")
def fleet_page(tmp_path_factory):
    hosts, platforms, states = fleet_hosts()
    files, result = build_report("fleet", "s", "2026-11-23T03:00:00+00:00", "commission", hosts, sorted(hosts),
                                 states, fleet={"platforms": platforms})
    run = tmp_path_factory.mktemp("fleet")
    for name, text in files.items():
        (run / name).write_text(text)
    return run / "report.html", result["summary"]


@pytest.fixture
def browser(tmp_path):
    devtools = DevTools(BROWSER, str(tmp_path / "profile"))
    yield devtools
    devtools.close()


def expected_status(summary_doc, host):
    entry = summary_doc["hosts"][host]
    if entry["verdict"] == "PASS" and any(c["verdict"] == "WARN" for c in entry["checks"]):
        return "WARN"
    return entry["verdict"]


ROWS = "Array.prototype.slice.call(document.querySelectorAll('#fleet-table tbody tr'))"
VISIBLE = ROWS + ".filter(function(r){return !r.hidden && r.offsetParent !== null;})"


@pytest.mark.skipif(not BROWSER, reason="chromium is not installed (make test installs Debian's chromium)")
def test_fleet_page_lists_failing_nodes_first_with_a_summary_per_platform(fleet_page, browser):
    page, summ = fleet_page
    browser.open("file://%s" % page)
    assert browser.js("document.querySelectorAll('script[src], link[href], img[src]').length") == 0
    rows = browser.js(ROWS + ".map(function(r){return [r.dataset.host, r.dataset.verdict, r.dataset.platform];})")
    assert len(rows) == 256 == len(summ["hosts"])
    statuses = [status for _, status, _ in rows]
    assert {status for _, status, _ in rows} >= {"FAIL", "ERROR", "UNREACHABLE", "WARN", "PASS"}
    rank = {"UNREACHABLE": 0, "ERROR": 1, "FAIL": 2, "WARN": 3, "PASS": 4}  # worst first (gds_checks.SEVERITY)
    assert [rank[s] for s in statuses] == sorted(rank[s] for s in statuses)  # failing first
    assert all(status == expected_status(summ, host) for host, status, _ in rows)
    platforms = browser.js("Array.prototype.slice.call(document.querySelectorAll('#platforms tr[data-platform]'))"
                           ".map(function(r){return Array.prototype.slice.call(r.cells).map(function(c){return c.textContent;});})")
    assert [p[:2] for p in platforms] == [[name, str(count)] for name, count in PLATFORMS]
    for cells in platforms:  # the host verdicts as the badges and summary.json count them, then the warned
        mine = [h for h, _, p in rows if p == cells[0]]
        verdicts = [summ["hosts"][h]["verdict"] for h in mine]
        assert cells[2:] == [str(verdicts.count(k)) for k in ("PASS", "FAIL", "ERROR", "UNREACHABLE")] + [
            str(sum(expected_status(summ, h) == "WARN" for h in mine))]
    badges = browser.js("document.querySelector('p.counts').textContent")
    for verdict, count in summ["counts"].items():  # one set of counts: the badges are summary.json's
        assert "%s %d" % (verdict, count) in badges
        assert sum(int(cells[2 + ("PASS", "FAIL", "ERROR", "UNREACHABLE").index(verdict)]) for cells in platforms) == count


@pytest.mark.skipif(not BROWSER, reason="chromium is not installed (make test installs Debian's chromium)")
def test_fleet_page_filters_by_verdict_and_platform(fleet_page, browser):
    page, summ = fleet_page
    browser.open("file://%s" % page)

    def choose(select, value):
        browser.js("(function(){var s=document.getElementById(%s); s.value=%s;"
                   "s.dispatchEvent(new Event('change'));})()" % (json.dumps(select), json.dumps(value)))
        return browser.js(VISIBLE + ".map(function(r){return r.dataset.host;})")

    failing = sorted(h for h in summ["hosts"] if summ["hosts"][h]["verdict"] == "FAIL")
    assert sorted(choose("filter-verdict", "FAIL")) == failing
    assert browser.js("document.getElementById('filter-count').textContent") == "%d of 256 hosts" % len(failing)
    shown = choose("filter-platform", "gh200")
    assert shown and all(int(h[4:]) > 224 for h in shown) and set(shown) < set(failing)
    shown = choose("filter-verdict", "not-pass")
    assert sorted(shown) == sorted(h for h in summ["hosts"] if int(h[4:]) > 224 and expected_status(summ, h) != "PASS")
    assert len(choose("filter-platform", "")) + len(choose("filter-verdict", "PASS")) == 256
    # typing in the host box narrows the rows as one types
    choose("filter-verdict", "")
    browser.click("#filter-host")
    browser.send("Input.insertText", text="node12")
    shown = browser.js(VISIBLE + ".map(function(r){return r.dataset.host;})")
    assert sorted(shown) == sorted(h for h in summ["hosts"] if "node12" in h) and len(shown) == 10
    # the query string presets the filters: a link to "the failing gh200 nodes"
    browser.open("file://%s?verdict=FAIL&platform=dgx_h100" % page)
    shown = browser.js(VISIBLE + ".map(function(r){return r.dataset.host;})")
    assert sorted(shown) == [h for h in failing if 128 < int(h[4:]) <= 224]


@pytest.mark.skipif(not BROWSER, reason="chromium is not installed (make test installs Debian's chromium)")
def test_one_click_from_the_fleet_table_to_a_node_and_back(fleet_page, browser):
    """The index holds a row a host; a click on a host opens its own page, whose first link goes
    back to the index."""
    page, summ = fleet_page
    browser.open("file://%s" % page)
    assert browser.js("document.querySelectorAll('[id^=\"host-\"]').length") == 0  # no host's section on the index
    first = browser.js(ROWS + "[0].dataset.host")
    last = browser.js(ROWS + "[255].dataset.host")
    for host in (first, last):
        browser.click("#fleet-table tr[data-host='%s'] a" % host)
        browser.wait_for("location.pathname.endsWith('/%s.html') && document.readyState === 'complete'" % host)
        heading = browser.js("document.getElementById('host-%s').textContent" % host)
        assert heading.startswith(host) and summ["hosts"][host]["verdict"] in heading
        browser.click("a[href='report.html']")
        browser.wait_for("location.pathname.endsWith('/report.html') && document.readyState === 'complete'")


@pytest.mark.skipif(not BROWSER, reason="chromium is not installed (make test installs Debian's chromium)")
def test_injected_markup_in_the_data_never_runs(tmp_path, browser):
    """Every string of the data is shown as text: markup and script in host names, check names,
    details, mount points and filters' query values create no element and run nothing."""
    from ansible_collections.gds.commission.plugins.module_utils.fleet.report import write_run
    payloads = ["<img src=x onerror=\"window.__pwned=1\">", "\"><script>window.__pwned=2</script>",
                "'><svg onload=\"window.__pwned=3\">", "</script><script>window.__pwned=4</script>",
                "javascript:window.__pwned=5", "esc \x1b[2J nul \x00 \udcff"]
    checks = [{"name": "netfs: %s" % text, "verdict": "FAIL", "expected": text, "actual": text, "detail": text}
              for text in payloads]
    hosts = {text: {"checks": checks, "arrays": [{"mount": text, "device": text, "members": []}]} for text in payloads}
    files, _ = build_report("r1", "s", "f", "commission", hosts, list(hosts), {})
    write_run(str(tmp_path), "r1", files)
    browser.open("file://%s?host=%s" % (tmp_path / "r1" / "report.html", "%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E"))
    assert browser.js("typeof window.__pwned") == "undefined"
    assert browser.js("document.querySelectorAll('img, svg:not(.chart), iframe, object').length") == 0
    assert browser.js("document.scripts.length") == 1
    browser.open("file://%s" % (tmp_path / "r1" / "report.html"))
    text = browser.js("document.body.innerText")
    assert payloads[0] in text and "esc \\x1b[2J nul \\x00 \\xff" in text
    links = browser.js("Array.prototype.slice.call(document.querySelectorAll('#fleet-table a')).map(function(a){return a.href;})")
    assert len(links) == len(payloads)
    for link in links:  # each host's page, as written, and nothing of it runs either
        browser.open(link)
        assert browser.js("location.protocol") == "file:" and browser.js("document.querySelector('h1').id").startswith("host-")
        assert browser.js("typeof window.__pwned") == "undefined" and browser.js("document.scripts.length") == 0
        assert browser.js("document.querySelectorAll('img, svg:not(.chart), iframe, object').length") == 0


# --------------------------------------------------------------------------------------------
# Where the bytes went: a job's watch drawn as bars, read back from the rendered page
# --------------------------------------------------------------------------------------------
@pytest.mark.skipif(not BROWSER, reason="chromium is not installed (make test installs Debian's chromium)")
def test_watch_bars_per_gpu_and_drive_against_the_limit(tmp_path, browser):
    """The guide's GPU 12 read of md127 (tests/fixtures/watch/): GPU 0, the bounce GPU, draws the
    longest receive bar; both drives draw the same bar; measured / limit sits at its fraction of
    the way to the limit line."""
    with open(os.path.join(ROOT, "tests", "fixtures", "watch", "dgx2-gpu12-result.json")) as handle:
        result = json.load(handle)
    docs = {"dgx2": host_document("dgx2", {"checks": [], "bench": [result]}, {})}
    page = tmp_path / "dgx2.html"
    page.write_text(host_page("dgx2", docs["dgx2"], "r1"))
    browser.open("file://%s" % page)
    chart = "document.querySelector('svg.watch')"
    assert browser.js(chart + ".getAttribute('data-job')") == result["name"]

    def width(selector):
        return browser.js("%s.querySelector(%s).getBoundingClientRect().width" % (chart, json.dumps(selector)))

    rx0, rx12 = width('rect.gpu-rx[data-gpu="0"]'), width('rect.gpu-rx[data-gpu="12"]')
    assert rx0 > rx12 > 0 and width('rect.gpu-tx[data-gpu="0"]') > width('rect.gpu-tx[data-gpu="12"]')
    assert round(rx0 / rx12, 2) == round(5237742827 / 4721644934, 2)  # drawn to the bytes' scale
    drives = browser.js(chart + ".querySelectorAll('rect.drive').length")
    assert drives == 2 and width('rect.drive[data-drive="nvme2n1"]') == width('rect.drive[data-drive="nvme3n1"]') > 0
    limit_bar = width("rect.limit")
    line_x = browser.js(chart + ".querySelector('line').getBoundingClientRect().left")
    bar_x = browser.js(chart + ".querySelector('rect.limit').getBoundingClientRect().left")
    assert round(limit_bar / (line_x - bar_x), 2) == round(result["watch"]["fraction"], 2)
    text = browser.js(chart + ".textContent")
    assert "53% of 7.877 GB/s" in text and "14 other GPUs moved less than 1%" in text and "util 100.0%" in text


def all_pass_host():
    """An 8-GPU host whose every check passes, as the demo's were: 88 PCIe links and their AER
    counters PASS, 88 RDMA rows SKIP for one reason, 40 benchmark checks PASS."""
    links = [{"bdf": "0000:%02x:00.0" % i, "role": "GPU" if i % 11 == 0 else "switch port", "upstream": "0000:00:01.0",
              "current_width": 16, "current_speed_gts": 32.0, "max_width": 16, "max_speed_gts": 32.0,
              "expected_width": 16, "expected_speed_gts": 32.0, "verdict": "PASS", "detail": "x16 at 32 GT/s"}
             for i in range(1, 89)]
    checks = [check("pcie: link %s" % link["bdf"], "PASS", "x16 32 GT/s", "x16 32 GT/s") for link in links]
    checks += [check("pcie: aer %s" % link["bdf"], "PASS", "no errors", "0 0 0") for link in links]
    checks += [check("rdma: mlx5_%d port 1: %s" % (i // 8, t), "SKIP", None, None, "simulated node")
               for i in range(11) for t in ("ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat",
                                           "ib_read_lat", "ib_send_lat", "osu_bw", "osu_latency")]
    checks += [check("bench: raid%d gpu%d seq_read: throughput_gib_s" % (g // 2, g), "PASS", ">= 7", 9.5)
               for g in range(8) for dummy in range(5)]
    return {"host": "node1", "verdict": "PASS", "checks": checks, "pcie_links": links}


@pytest.mark.skipif(not BROWSER, reason="chromium is not installed (make test installs Debian's chromium)")
def test_a_host_whose_checks_all_pass_takes_at_most_3000_px(tmp_path, browser):
    """Problems first, the rest folded: each run of PASS rows and each run of SKIP rows of one
    reason is one line (a <details>); an all-PASS 8-GPU host was ~17,000 px."""
    doc = all_pass_host()
    page = tmp_path / "node1.html"
    page.write_text(host_page("node1", doc, "r1"))
    browser.open("file://%s" % page)
    height = browser.js("document.documentElement.scrollHeight - document.getElementById('host-node1').offsetTop")
    assert 0 < height <= 3000, height
    folds = browser.js("Array.prototype.slice.call(document.querySelectorAll('details.fold > summary'))"
                       ".map(function(s){return s.textContent;})")
    assert "88 links PASS" in folds and "88 SKIP: simulated node" in folds, folds
    assert "176 PASS" in folds and "40 PASS" in folds, folds  # hardware health and the benchmarks: a line each
    browser.click("details.fold > summary")  # a fold opens on a click and holds its rows
    assert browser.js("document.querySelector('details.fold').open") is True
