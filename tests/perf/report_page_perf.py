#!/usr/bin/env python3
"""The report's pages at fleet scale, measured in headless Chromium.

For each N (default 500 and 1,000): N hosts' documents made from real HOST.json files (the demo's
sim-a100 and sim-h100, tests/fixtures/reports/, or --from a run directory), named node0001...,
on three platforms, every 17th with a failing check, every 41st unreachable; rendered as
build_report renders them (report.html, the index; HOST.html, a page per host). Then, per N:

- bytes: the index, the largest host page, the whole run directory's pages;
- in Chromium (DevTools protocol over a pipe, a fresh tab per load, each load --loads times, the
  median): first contentful paint of the index, the time its filters are working (the page's
  `gds-filters-ready` mark), one filter change (verdict = not PASS) in the page's own clock, and
  the index's scroll height;
- the peer: the same N hosts in one page (the index with every host's section below it, as
  report.html was before the split), measured the same way. Ratios are index / one page.

Prints a table; asserts nothing (docs/reports.md quotes it).

  .venv/bin/python tests/perf/report_page_perf.py [--sizes 500,1000] [--loads 3] [--from RUN_DIR]
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
sys.path.insert(0, os.path.join(ROOT, "collections"))
from devtools import BROWSER, DevTools  # noqa: E402
from ansible_collections.gds.commission.plugins.module_utils.core.checks import host_verdict  # noqa: E402
from ansible_collections.gds.commission.plugins.module_utils.fleet.report import (  # noqa: E402
    fleet_row, host_file_name, host_html, host_page, render_html, summary,
)

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "reports")
PLATFORMS = ("dgx_a100", "dgx_h100", "gh200")


def load_docs(source):
    """The template documents: every HOST.json (or HOST.json.gz) of ``source``."""
    docs = []
    for name in sorted(os.listdir(source)):
        path = os.path.join(source, name)
        if name.endswith(".json.gz"):
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                docs.append(json.load(handle))
        elif name.endswith(".json") and name not in ("summary.json", "drift.json") and not name.endswith(".inputs.json"):
            with open(path, encoding="utf-8") as handle:
                doc = json.load(handle)
            if isinstance(doc, dict) and "checks" in doc and "verdict" in doc:
                docs.append(doc)
    if not docs:
        raise SystemExit("report_page_perf: no HOST.json in %s" % source)
    return docs


def fleet_docs(templates, count):
    """``count`` hosts' documents from the templates, some failing, some unreachable."""
    docs = {}
    for index in range(1, count + 1):
        name = "node%04d" % index
        doc = json.loads(json.dumps(templates[index % len(templates)]))
        doc["host"], doc["profile"] = name, PLATFORMS[index % len(PLATFORMS)]
        if index % 41 == 0:
            doc["checks"] = [{"name": "host: reachable", "verdict": "UNREACHABLE", "expected": "reachable",
                              "actual": "unreachable", "detail": "ssh: connect to host %s: timed out" % name}]
        elif index % 17 == 0 and doc["checks"]:
            doc["checks"][0] = dict(doc["checks"][0], verdict="FAIL", detail="made failing for the measurement")
        doc["verdict"] = host_verdict(c["verdict"] for c in doc["checks"])
        docs[name] = doc
    return docs


def write_pages(directory, docs):
    """The split pages as build_report writes them, and the one-page peer; their paths and sizes."""
    summ = summary("perf", "s", "f", docs)
    index = render_html(summ, docs, rows={name: fleet_row(name, doc) for name, doc in docs.items()})
    pages = {host_file_name(name) + ".html": host_page(name, doc, "perf") for name, doc in docs.items()}
    tail = index.rindex("<script>")
    one_page = index[:tail] + "".join(host_html(name, doc) for name, doc in docs.items()) + index[tail:]
    for name, text in dict(pages, **{"report.html": index, "one-page.html": one_page}).items():
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.write(text)
    size = lambda text: len(text.encode("utf-8"))  # noqa: E731
    return {"index": size(index), "largest_host_page": max(size(t) for t in pages.values()),
            "all_pages": size(index) + sum(size(t) for t in pages.values()), "one_page": size(one_page)}


MEASURE = """(function () {
  var paint = performance.getEntriesByType('paint').filter(function (e) { return e.name === 'first-contentful-paint'; });
  var ready = performance.getEntriesByName('gds-filters-ready');
  var select = document.getElementById('filter-verdict');
  var start = performance.now();
  select.value = 'not-pass';
  select.dispatchEvent(new Event('change'));
  var shown = document.getElementById('filter-count').textContent;
  var filter = performance.now() - start;
  select.value = '';
  select.dispatchEvent(new Event('change'));
  return {fcp: paint.length ? paint[0].startTime : null, ready: ready.length ? ready[0].startTime : null,
          filter: filter, shown: shown, height: document.documentElement.scrollHeight};
})()"""


def measure(browser, path, loads):
    """The median of each figure over ``loads`` fresh loads of ``path``."""
    runs = []
    for _ in range(loads):
        browser.open("file://%s" % path)
        browser.wait_for("performance.getEntriesByType('paint').length > 0", tries=600)
        runs.append(browser.js(MEASURE))
    out = {key: statistics.median(r[key] for r in runs) for key in ("fcp", "ready", "filter", "height")
           if all(r[key] is not None for r in runs)}
    out["shown"] = runs[-1]["shown"]
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="500,1000")
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--from", dest="source", default=FIXTURES, help="a run directory with HOST.json files")
    args = parser.parse_args()
    if not BROWSER:
        raise SystemExit("report_page_perf: chromium is not installed (apt-get install chromium)")
    templates = load_docs(args.source)
    print("templates: %s (%s)" % (", ".join(d["host"] for d in templates), args.source))
    print("%6s %-9s %10s %10s %9s %9s %9s %9s  %s" % ("hosts", "page", "bytes", "largest", "fcp ms", "ready ms",
                                                       "filter ms", "height px", "filter result"))
    with tempfile.TemporaryDirectory() as work:
        browser = DevTools(BROWSER, os.path.join(work, "profile"))
        try:
            for count in [int(n) for n in args.sizes.split(",")]:
                directory = os.path.join(work, str(count))
                os.mkdir(directory)
                sizes = write_pages(directory, fleet_docs(templates, count))
                index = measure(browser, os.path.join(directory, "report.html"), args.loads)
                peer = measure(browser, os.path.join(directory, "one-page.html"), args.loads)
                for label, figures, size in (("index", index, sizes["index"]), ("one page", peer, sizes["one_page"])):
                    print("%6d %-9s %10d %10s %9.0f %9.0f %9.1f %9d  %s" % (
                        count, label, size, sizes["largest_host_page"] if label == "index" else "-",
                        figures.get("fcp", float("nan")), figures.get("ready", float("nan")),
                        figures.get("filter", float("nan")), figures.get("height", 0), figures["shown"]))
                print("%6d ratios index / one page: bytes %.3f, first paint %.2f, filters ready %.2f; all %d pages %.1f MB"
                      % (count, sizes["index"] / sizes["one_page"], index["fcp"] / peer["fcp"],
                         index["ready"] / peer["ready"], count + 1, sizes["all_pages"] / 1e6))
        finally:
            browser.close()


if __name__ == "__main__":
    main()
