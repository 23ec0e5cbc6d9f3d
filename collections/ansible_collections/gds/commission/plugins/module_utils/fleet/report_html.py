# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.html, the fleet's index (verdicts, per platform, filters, one row per host with its first
problem) and HOST.html, a page per host (affinity, PCIe links, network, checks, benchmarks, the
watch of each job) as inline SVG and tables; their CSS and script. Every value is escaped for HTML
(_e); nothing is fetched. An index of a row a host stays small at 1,000 hosts (tests/perf/
report_page_perf.py); a host's page holds its own weight alone."""
from __future__ import annotations

from urllib.parse import quote

from ansible_collections.gds.commission.plugins.module_utils.core.checks import FAILING, SEVERITY, gb_text, worst
from ansible_collections.gds.commission.plugins.module_utils.core.files import natural_key, printable
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import is_figure
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_baselines import UNKNOWN_PLATFORM
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_files import host_file_name
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_links import group_path, link_state
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_tree import tree_html
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_text import (
    FOLDED, as_text, figure_text, fold_reason, folds, html_text, share_text, table_figure,
)
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import paired_nics

COLORS = {"PASS": "#2e7d32", "WARN": "#ef8f00", "FAIL": "#c62828", "SKIP": "#757575",
          "ERROR": "#6a1b9a", "UNREACHABLE": "#37474f"}


_e = html_text  # every value the page shows goes through it


def _badge(verdict):
    return '<span class="badge" style="background:%s">%s</span>' % (COLORS.get(verdict, "#000"), _e(verdict))


def _bus(bdf):
    parts = str(bdf or "").split(":")
    return "0x" + parts[-2] if len(parts) > 1 else str(bdf or "")


def affinity_rows(doc):
    topo = doc.get("topology") or {}
    gpus = {g.get("index"): g for g in topo.get("gpus") or [] if isinstance(g, dict)}
    drives = {d.get("name"): d for d in topo.get("nvme") or [] if isinstance(d, dict)}
    mounts = {}
    for array in doc.get("arrays") or []:
        for member in array.get("members") or [] if isinstance(array, dict) else []:
            mounts[member] = array
    rows = []
    for group in topo.get("groups") or []:
        nvme = [str(d) for d in group.get("nvme") or []]
        array = next((mounts[d] for d in nvme if d in mounts), None)
        rows.append({
            "group": group.get("id"),
            "array": "%s (%s)" % (array.get("mount"), array.get("device")) if array else "-",
            "gpus": ", ".join(str(i) for i in group.get("gpus") or []),
            "gpu_bus": ", ".join(_bus(gpus[i].get("bdf")) for i in group.get("gpus") or [] if i in gpus),
            "nvme": ", ".join(nvme) or "-",
            "nvme_bus": ", ".join(_bus(drives[d].get("bdf")) for d in nvme if d in drives) or "-",
            "nics": ", ".join(str(n) for n in group.get("nics") or []) or "-",
            "link": group.get("link") or "-",
            "numa": group.get("numa_node"),
        })
    return rows


def bar_chart(checks, width=640):
    """Inline SVG: one bar per measured metric, scaled to its own bounds, bound lines drawn."""
    rows = [c for c in checks if is_figure(c.get("actual")) and (is_figure(c.get("low")) or is_figure(c.get("high")))]
    if not rows:
        return ""
    row_h, label_w, bar_w = 26, 300, width - 300 - 110
    height = row_h * len(rows) + 24
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" class="chart">' % (width, height)]
    for i, check in enumerate(rows):
        y = 8 + i * row_h
        bounds = [v for v in (check.get("low"), check.get("high"), check["actual"]) if is_figure(v)]
        scale_max = max(bounds) * 1.25 or 1.0

        def x_of(v, scale_max=scale_max):
            return label_w + bar_w * max(0.0, min(1.0, float(v) / scale_max))

        color = COLORS.get(check["verdict"], "#000")
        label = ("%s: %s" % (check["job"], check["metric"]) if check.get("job") and check.get("metric")
                 else check["name"])
        label = label if len(label) <= 46 else "\u2026" + label[-45:]
        parts.append('<text x="%d" y="%d" class="lbl">%s</text>' % (label_w - 8, y + 14, _e(label)))
        parts.append('<rect x="%d" y="%d" width="%d" height="16" fill="#eceff1"/>' % (label_w, y + 2, bar_w))
        parts.append('<rect x="%d" y="%d" width="%.1f" height="16" fill="%s"><title>%s</title></rect>'
                     % (label_w, y + 2, x_of(check["actual"]) - label_w, color, _e("%s: %s %s (expected %s)" % (
                         check["name"], check["actual"], check.get("unit", ""), check.get("expected")))))
        for bound, dash in ((check.get("low"), ""), (check.get("high"), ' stroke-dasharray="3,2"')):
            if is_figure(bound):
                parts.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000" stroke-width="2"%s/>'
                             % (x_of(bound), x_of(bound), y, y + 20, dash))
        parts.append('<text x="%d" y="%d" class="val">%s %s</text>' % (label_w + bar_w + 6, y + 14,
                                                                       _e(check["actual"]), _e(check.get("unit", ""))))
    parts.append('<text x="%d" y="%d" class="note">solid line: lower bound, dashed: upper bound</text>'
                 % (label_w, height - 4))
    parts.append("</svg>")
    return "".join(parts)


def _dicts(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def watch_chart(result, width=860):
    """Inline SVG of one job's watch (docs/reports.md#watch): measured against the path's limit,
    then a bar per GPU (PCIe bytes received and sent) and per drive (bytes, %util), on one scale.
    Drawn from the JSON only; anything that is no figure is left out."""
    watch = result.get("watch") if isinstance(result.get("watch"), dict) else None
    if not watch:
        return ""
    rec = result.get("record") if isinstance(result.get("record"), dict) else {}
    rows = _watch_limit_rows(watch, rec) + _watch_traffic_rows(watch, rec)
    return _watch_svg(rows, width, result.get("name")) if rows else ""


def _watch_limit_rows(watch, rec):
    """The chart's first rows: measured against the path's limit and against the host read."""
    rows = []
    limit = watch.get("limit") if isinstance(watch.get("limit"), dict) else {}
    fraction, measured = watch.get("fraction"), rec.get("throughput_gib_s")
    if is_figure(fraction) and is_figure(measured) and is_figure(limit.get("gb_s")):
        rows.append(("limit", "measured / limit", min(fraction, 1.25) / 1.25, None,
                     "%.3g GiB/s = %s of %s GB/s (%s)" % (measured, share_text(fraction, 1, "%.0f%%"), limit["gb_s"],
                                                          limit.get("bound")), {"data-fraction": fraction}))
    elif limit.get("unknown"):
        rows.append(("note", "path limit", None, None, "unknown: %s" % limit["unknown"], {}))
    ceiling = watch.get("ceiling") if isinstance(watch.get("ceiling"), dict) else {}
    if is_figure(ceiling.get("fraction")) and is_figure(measured) and is_figure(ceiling.get("gib_s")):
        # the measured ceiling: the same drives read into host memory in the same run
        rows.append(("limit", "measured / host read", min(ceiling["fraction"], 1.25) / 1.25, None,
                     "%.3g GiB/s = %s of the %s GiB/s read into host memory (%s)" % (
                         measured, share_text(ceiling["fraction"], 1, "%.0f%%"), ceiling["gib_s"], as_text(ceiling.get("job"))),
                     {"data-ceiling": ceiling["fraction"]}))
    elif ceiling.get("unknown"):
        rows.append(("note", "host read", None, None, "unknown: %s" % ceiling["unknown"], {}))
    return rows


def _watch_traffic_rows(watch, rec):
    """A row per GPU (received and sent) and per drive, on one scale, and what is unknown."""
    rows = []
    gpus = [g for g in _dicts(watch.get("gpus")) if is_figure(g.get("rx_bytes")) and is_figure(g.get("tx_bytes"))]
    drives = [d for d in _dicts(watch.get("drives")) if is_figure(d.get("read_bytes")) and is_figure(d.get("write_bytes"))]
    moved = rec.get("bytes") if is_figure(rec.get("bytes")) else 0
    top = max([moved] + [max(g["rx_bytes"], g["tx_bytes"]) for g in gpus]
              + [d["read_bytes"] + d["write_bytes"] for d in drives]) or 1
    shown = [g for g in gpus if max(g["rx_bytes"], g["tx_bytes"]) >= 0.01 * top or g.get("index") == rec.get("gpu")]
    for gpu in shown:
        label = "GPU%s %s" % (gpu.get("index"), gpu.get("bdf") or "")
        rows.append(("gpu", label, gpu["rx_bytes"] / top, gpu["tx_bytes"] / top,
                     "rx %s, tx %s" % (gb_text(gpu["rx_bytes"]), gb_text(gpu["tx_bytes"])), {"data-gpu": gpu.get("index")}))
    if len(shown) < len(gpus):
        rows.append(("note", "", None, None, "%d other GPUs moved less than 1%%" % (len(gpus) - len(shown)), {}))
    elif watch.get("gpus_unknown"):
        rows.append(("note", "GPUs", None, None, "unknown: %s" % watch["gpus_unknown"], {}))
    sources = sorted({g["source"] for g in gpus if isinstance(g.get("source"), str)})
    if sources:  # which NVML counted: GPM, the byte counters, or an estimate from sampled throughput
        rows.append(("note", "GPU bytes from", None, None, "; ".join(sources), {}))
    unknown = [g for g in _dicts(watch.get("gpus")) if g.get("unknown")]
    if unknown:
        rows.append(("note", "GPUs unknown", None, None, "; ".join(
            "GPU%s: %s" % (g.get("index"), g["unknown"]) for g in unknown[:2])
            + ("; %d more" % (len(unknown) - 2) if len(unknown) > 2 else ""), {}))
    for drive in drives:
        total = drive["read_bytes"] + drive["write_bytes"]
        util = drive.get("util_pct")
        rows.append(("drive", "%s %s" % (drive.get("name"), drive.get("bdf") or ""), total / top, None,
                     "%s%s" % (gb_text(total), ", util %s%%" % util if is_figure(util) else ""), {"data-drive": drive.get("name")}))
    if watch.get("drives_unknown"):
        rows.append(("note", "drives", None, None, "unknown: %s" % watch["drives_unknown"], {}))
    if is_figure(watch.get("outside_io_seconds")) and is_figure(watch.get("seconds")):
        rows.append(("note", "window", None, None, "util over the benchmark's %s s of I/O; %s s of its processes' "
                     "start and stop left out" % (figure_text(watch["seconds"], "%.1f"), figure_text(watch["outside_io_seconds"], "%.1f")), {}))
    cufile = watch.get("cufile") if isinstance(watch.get("cufile"), dict) else {}
    if isinstance(cufile.get("buffer_gpus"), list) and cufile["buffer_gpus"]:
        rows.append(("note", "cuFile bounce buffers", None, None,
                     "on GPU %s (gds_stats)" % ", ".join(str(i) for i in cufile["buffer_gpus"]), {}))
    return rows


def _watch_svg(rows, width, name):
    """The rows drawn: (kind, label, first bar, second bar, text, data attributes) each."""
    label_w, bar_w, row_h = 200, width - 200 - 340, 22
    height = row_h * len(rows) + 8
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" class="chart watch" data-job="%s">'
             % (width, height, _e(name))]
    for i, (kind, label, first, second, text, data) in enumerate(rows):
        y = 4 + i * row_h
        attrs = "".join(' %s="%s"' % (k, _e(v)) for k, v in data.items())
        label = label if len(label) <= 34 else "\u2026" + label[-33:]
        parts.append('<text x="%d" y="%d" class="lbl">%s</text>' % (label_w - 8, y + 13, _e(label)))
        if first is not None:
            first, second = (max(0.0, min(1.0, v or 0.0)) for v in (first, second))  # hostile figures stay in the box
            parts.append('<rect x="%d" y="%d" width="%d" height="14" fill="#eceff1"/>' % (label_w, y + 2, bar_w))
            if kind == "gpu":  # received above, sent below
                parts.append('<rect class="bar gpu-rx"%s x="%d" y="%d" width="%.1f" height="7" fill="#1565c0"/>'
                             % (attrs, label_w, y + 2, bar_w * first))
                parts.append('<rect class="bar gpu-tx"%s x="%d" y="%d" width="%.1f" height="7" fill="#90caf9"/>'
                             % (attrs, label_w, y + 9, bar_w * second))
            else:
                color = "#2e7d32" if kind == "drive" else "#6a1b9a"
                parts.append('<rect class="bar %s"%s x="%d" y="%d" width="%.1f" height="14" fill="%s"/>'
                             % (kind, attrs, label_w, y + 2, bar_w * first, color))
            if kind == "limit":  # the limit itself at 1.0 of a scale that runs to 1.25
                x = label_w + bar_w / 1.25
                parts.append('<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#000" stroke-width="2"/>' % (x, x, y, y + 18))
            parts.append('<text x="%d" y="%d" class="val">%s</text>' % (label_w + bar_w + 6, y + 13, _e(text)))
        else:
            parts.append('<text x="%d" y="%d" class="val">%s</text>' % (label_w, y + 13, _e(text)))
    parts.append("</svg>")
    return "".join(parts)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212121;max-width:1200px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid #cfd8dc;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px;color:#37474f} .meta{color:#616161;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:4px 0 12px} th,td{border:1px solid #cfd8dc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eceff1} .badge{color:#fff;border-radius:3px;padding:1px 6px;font-size:12px;font-weight:600}
.counts span{margin-right:10px} .chart .lbl{font-size:11px;text-anchor:end;fill:#37474f} .chart .val{font-size:11px;fill:#212121}
.chart .note{font-size:10px;fill:#757575} td.detail{color:#555;max-width:420px}
h4{font-size:13px;margin:10px 0 4px} .filters{margin:6px 0;font-size:13px} .filters label{margin-right:12px}
a.up{font-size:12px;font-weight:400;margin-left:8px} td.problem{max-width:460px;color:#555}
tr.slow td{background:#ffebee;font-weight:600} p.slow{color:#c62828;font-weight:600;margin:4px 0}
.tree-wrap{overflow-x:auto;max-width:100%} svg.tree text{text-anchor:middle} svg.tree .name{font-size:11px;fill:#212121}
svg.tree .sub{font-size:10px;fill:#546e7a} svg.tree .bus{stroke:#b0bec5;stroke-dasharray:3 3}
svg.tree .caption{font-size:12px;fill:#0d47a1;text-anchor:start} svg.tree g.job{display:none} svg.tree g.job:target{display:inline}
svg.tree .path{stroke:#1565c0;stroke-opacity:.55;stroke-width:9} svg.tree .bytes{font-size:11px;fill:#0d47a1;text-anchor:start;font-weight:600}
svg.tree .bottleneck{fill:none;stroke:#c62828;stroke-width:3;stroke-dasharray:4 2} svg.tree .crossed{fill:none;stroke:#1565c0;stroke-width:3}
.legend{font-size:12px;color:#455a64;margin:2px 0 8px} .swatch{display:inline-block;width:12px;height:12px;border:1px solid #90a4ae;vertical-align:middle}
details.fold{margin:2px 0 6px} details.fold>summary{cursor:pointer;color:#455a64;font-size:13px}
"""


def page_head(title, run_id):
    """A page's head (title, the inline CSS) and the opening of its body: report.html of both modes."""
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s %s</title><style>%s</style>"
            "</head><body>" % (_e(title), _e(run_id), CSS))


def render_html(summary_doc, docs, title="GDS commissioning report", rows=None):
    """The run's index page, report.html: the counts, the fleet table (each host a link to its own
    page, host_page). ``rows``: {host: fleet_row(...)} built already (build_report's, one host at
    a time); the others are rendered here."""
    counts = summary_doc["counts"]
    out = [page_head(title, summary_doc["run_id"])]
    out.append("<h1>%s</h1><div class=\"meta\">run %s &middot; started %s &middot; finished %s</div>"
               % (_e(title), _e(summary_doc["run_id"]), _e(summary_doc["started"]), _e(summary_doc["finished"])))
    if summary_doc.get("check_mode"):
        out.append("<p class=\"meta\"><b>Check mode</b>: nothing was measured or changed; this run's verdicts say "
                   "what a run without --check would start from, and reports/latest does not point here.</p>")
    out.append("<p class=\"counts\">%s</p>" % "".join("<span>%s %d</span>" % (_badge(k), v) for k, v in counts.items()))
    out.append(fleet_html(docs, rows))
    out.append("<script>%s</script></body></html>\n" % FLEET_JS)
    return "".join(out)


def host_page_name(host):
    """The file name of a host's page, HOST.html beside HOST.json (report_files.host_file_name)."""
    return "%s.html" % host_file_name(host)


def host_page(name, doc, run_id, title="GDS commissioning report"):
    """A host's own page, HOST.html beside report.html: its section and a link back to the index."""
    return "".join((page_head("%s: %s" % (title, printable(name)), run_id),
                    "<div class=\"meta\"><a href=\"report.html\">&larr; fleet index</a> &middot; run %s</div>" % _e(run_id),
                    host_html(name, doc), "</body></html>\n"))


def render_drift_html(doc, title="GDS drift report"):
    """The drift run's page (drift.json's content): each host that drifted, or could not be
    checked, with every setting's expected and actual value; the hosts with nothing drifted
    folded into one line. Self-contained, as report.html."""
    hosts = doc.get("hosts") or {}
    drifted = [(h, e) for h, e in sorted(hosts.items(), key=lambda item: natural_key(item[0])) if e.get("drifted") is not False]
    calm = [h for h, e in sorted(hosts.items(), key=lambda item: natural_key(item[0])) if e.get("drifted") is False]
    out = [page_head(title, doc.get("run_id")),
           "<h1>%s</h1><div class=\"meta\">run %s &middot; %d hosts: %d drifted or not checked, %d with nothing drifted</div>"
           % (_e(title), _e(doc.get("run_id")), len(hosts), len(drifted), len(calm))]
    for host, entry in drifted:
        state = "not checked" if entry.get("drifted") is None else "%d settings drifted" % len(entry.get("items") or [])
        out.append("<h2 id=\"host-%s\">%s %s <span class=\"meta\">%s</span></h2>" % (
            _e(host), _e(host), _badge("ERROR" if entry.get("drifted") is None else "FAIL"), _e(state)))
        if entry.get("detail"):
            out.append("<p class=\"slow\">%s</p>" % _e(entry["detail"]))
        if entry.get("items"):
            out.append("<table><tr><th>setting</th><th>expected</th><th>actual</th></tr>%s</table>" % "".join(
                "<tr><td>%s</td><td>%s</td><td>%s</td></tr>" % (_e(i.get("setting")), _e(i.get("expected")), _e(i.get("actual")))
                for i in entry["items"]))
    if calm:
        out.append(folded("%d hosts with nothing drifted" % len(calm), "<p>%s</p>" % ", ".join(_e(h) for h in calm)))
    out.append("</body></html>")
    return "".join(out)


def host_html(name, doc):
    """One host's section of the page: affinity, links, network, checks, benchmarks, watch."""
    out = ["<h1 id=\"host-%s\">%s %s</h1>" % (_e(name), _e(name), _badge(doc["verdict"]))]
    rows = affinity_rows(doc)
    if rows:
        out.append("<h3>GPU / NVMe affinity</h3><table><tr><th>group</th><th>RAID array</th><th>GPU #</th><th>GPU PCIe</th>"
                   "<th>NVMe</th><th>NVMe PCIe</th><th>NICs</th><th>link</th><th>NUMA</th></tr>")
        for row in rows:
            out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % _e(row[k]) for k in
                                               ("group", "array", "gpus", "gpu_bus", "nvme", "nvme_bus", "nics", "link", "numa")))
        out.append("</table>")
    out.append(tree_html(doc, COLORS))
    out.append(links_html(doc))
    out.append(network_html(doc))
    bench = [c for c in doc["checks"] if c.get("area") == "bench"]
    health = [c for c in doc["checks"] if c.get("area") in HEALTH_AREAS]
    settings = [c for c in doc["checks"] if c not in bench and c not in health]
    if settings:
        out.append("<h3>Settings and topology</h3>" + _check_table(settings))
    if health:
        out.append("<h3>Hardware health</h3>" + _check_table(health))
    if bench:
        out.append("<h3>Benchmarks against thresholds</h3>")
        chart = bar_chart(bench)
        if chart:
            out.append(chart)
        out.append(_check_table(bench))
    results = doc.get("bench") or []
    if results:
        out.append("<h3>Benchmark records</h3><table><tr><th>job</th><th>xfer</th><th>io</th><th>threads</th>"
                   "<th>GiB/s</th><th>IOPS</th><th>lat mean us</th><th>lat p99 us</th><th>path</th>"
                   "<th>of the host read</th></tr>")
        for result in results:
            rec = result.get("record") or {}
            lat = rec.get("lat_us") or {}
            out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % _e(v) for v in (
                result.get("name"), rec.get("xfer_type"), rec.get("io_type"), rec.get("threads"),
                table_figure(rec.get("throughput_gib_s")), table_figure(rec.get("iops")), table_figure(lat.get("mean")),
                table_figure(lat.get("p99")), (rec.get("path") or {}).get("mode", "-"), ceiling_text(result))))
        out.append("</table>")
        out.append(every_gpu_html(results))
        charts = [(r, watch_chart(r)) for r in results if isinstance(r, dict)]
        if any(chart for dummy, chart in charts):
            out.append("<h3>Where the bytes went</h3><p class=\"meta\">per job: measured against the "
                       "limit of its PCIe path (line: the limit); PCIe bytes per GPU (dark: received, "
                       "light: sent); bytes per drive</p>")
            # a job with a problem shows its chart; the others are a line each, opened on a click
            troubled = {c["name"] for c in doc["checks"] if c["verdict"] not in FOLDED}
            out += ["<details class=\"fold\"%s><summary>%s</summary>%s</details>" % (
                " open" if any(n.startswith("bench: %s:" % r.get("name")) for n in troubled) else "",
                _e(r.get("name")), chart) for r, chart in charts if chart]
    return "".join(out)


def ceiling_text(result):
    """"GPU path at 81 % of what the drives give" for a job with a host read of its drives
    (watch.ceiling), "unknown: why", or "-"."""
    watch = result.get("watch") if isinstance(result.get("watch"), dict) else {}
    ceiling = watch.get("ceiling") if isinstance(watch.get("ceiling"), dict) else None
    if ceiling is None:
        return "-"
    if is_figure(ceiling.get("fraction")):
        return "%s (%s: %s GiB/s)" % (share_text(ceiling["fraction"], 1), as_text(ceiling.get("job")), table_figure(ceiling.get("gib_s")))
    return "unknown: %s" % as_text(ceiling.get("unknown") or "no figure")


def every_gpu_rows(results):
    """The concurrent jobs of a host (watch.concurrency): each run's aggregate against the sum of
    its GPUs' single figures and against the links they share, then per affinity group and per
    root port. Only what is a figure is shown as one."""
    rows = []
    for result in _dicts(results):
        watch = result.get("watch") if isinstance(result.get("watch"), dict) else {}
        entry = watch.get("concurrency") if isinstance(watch.get("concurrency"), dict) else None
        if entry is None:
            continue
        limit = watch.get("limit") if isinstance(watch.get("limit"), dict) else {}
        shared = ["%s%s" % (as_text(e.get("what")), " %s GB/s" % e["gb_s"] if is_figure(e.get("gb_s")) else
                            " (rate unknown)" if not str(e.get("element", "")).startswith("pci") else " (not modelled)")
                  for e in _dicts(limit.get("shared"))]
        rows.append({
            "name": result.get("name"), "gpus": [r.get("gpu") for r in _dicts(entry.get("jobs"))],
            "aggregate": table_figure(entry.get("aggregate_gib_s")), "singles": table_figure(entry.get("singles_gib_s")),
            "scaling": share_text(entry.get("scaling"), 1), "limit": table_figure(limit.get("gb_s")) if not limit.get("unknown")
            else "unknown", "bound": as_text(limit.get("bound") or ("unknown: %s" % limit["unknown"] if limit.get("unknown")
                                                                    else "-")),
            "shared": "; ".join(shared) or "-", "ceiling": ceiling_text(result), "unknown": as_text(entry.get("unknown") or ""),
            # what each GPU carried of the job's bytes (NVML's PCIe counters), or why unknown
            "carried": ", ".join(carried_text(s) for s in _dicts(watch.get("gpu_shares"))) or "-",
            "parts": [(title, [{"key": as_text(b.get("key")), "gpus": ", ".join(as_text(g) for g in b.get("gpus") or []),
                                "aggregate": table_figure(b.get("aggregate_gib_s")), "singles": table_figure(b.get("singles_gib_s")),
                                "scaling": share_text(b.get("scaling"), 1), "limit": table_figure(b.get("limit_gb_s")),
                                "bound": as_text(b.get("bound") or "-")} for b in _dicts(entry.get(key))])
                      for title, key in (("per affinity group", "groups"), ("per root port", "root_ports"))]})
    return rows


def carried_text(share):
    """"GPU0 30 %": what one GPU carried of an all-at-once job's bytes; "GPU3 unknown"."""
    figure = share_text(share.get("share"), 1) if is_figure(share.get("share")) else "unknown"
    return "GPU%s %s" % (as_text(share.get("index")), figure)


def every_gpu_html(results):
    """The host's "Every GPU at once" section (docs/reports.md#reporthtml); "" without one."""
    rows = every_gpu_rows(results)
    if not rows:
        return ""
    out = ["<h3>Every GPU at once</h3><p class=\"meta\">each run in one gdsbench process: the aggregate against "
           "the sum of what each GPU reached alone, against the limit of the links the GPUs share (the path "
           "model) and against the same drives read into host memory</p>"
           "<table class=\"every-gpu\"><tr><th>run</th><th>GPUs</th><th>aggregate GiB/s</th><th>sum of singles GiB/s</th>"
           "<th>aggregate / sum</th><th>limit GB/s</th><th>what bounds it</th><th>shared</th><th>of the host read</th>"
           "<th>each GPU's share of the bytes</th></tr>"]
    for row in rows:
        out.append("<tr data-job=\"%s\">%s</tr>" % (_e(row["name"]), "".join("<td>%s</td>" % _e(v) for v in (
            row["name"], ", ".join(as_text(g) for g in row["gpus"]), row["aggregate"], row["singles"], row["scaling"],
            row["limit"], row["bound"], row["shared"], row["ceiling"], row["carried"]))))
        if row["unknown"]:
            out.append("<tr><td></td><td colspan=\"9\" class=\"detail\">unknown: %s</td></tr>" % _e(row["unknown"]))
        for title, parts in row["parts"]:
            for part in parts:
                out.append("<tr class=\"part\"><td>%s</td>%s<td></td><td></td><td></td></tr>" % (
                    _e("%s: %s" % (title, part["key"])), "".join("<td>%s</td>" % _e(part[k]) for k in (
                        "gpus", "aggregate", "singles", "scaling", "limit", "bound"))))
    out.append("</table>")
    return "".join(out)


# The fleet table's columns and order: the worst first (core/checks.SEVERITY; a host is never SKIP).
FLEET_ORDER = {verdict: place for place, verdict in enumerate(v for v in reversed(SEVERITY) if v != "SKIP")}


def fleet_status(doc):
    """The host's verdict, or WARN for a PASS host with a WARN check (the fleet filter's values)."""
    if doc["verdict"] == "PASS" and any(c["verdict"] == "WARN" for c in doc["checks"]):
        return "WARN"
    return doc["verdict"]


def first_problem(doc):
    """The first check that made the host what it is (a failing one, else a WARN), or None."""
    for wanted in (FAILING, ("WARN",)):
        for check in doc["checks"]:
            if check["verdict"] in wanted:
                return check
    return None


# the host verdicts summary.json counts (report.summary), in the order of the badges
HOST_VERDICTS = ("PASS", "FAIL", "ERROR", "UNREACHABLE")


def platform_summary(docs):
    """{platform: {hosts, PASS, FAIL, ERROR, UNREACHABLE, warned}}: the host verdicts as the badges
    and summary.json count them (one set of counts), and how many of the PASS hosts carry a WARN."""
    out = {}
    for doc in docs.values():
        row = out.setdefault(doc.get("profile") or UNKNOWN_PLATFORM,
                             dict({"hosts": 0, "warned": 0}, **{k: 0 for k in HOST_VERDICTS}))
        row["hosts"] += 1
        row[doc["verdict"]] = row.get(doc["verdict"], 0) + 1  # a document built by hand may hold any verdict
        row["warned"] += fleet_status(doc) == "WARN"
    return out


def fleet_html(docs, rows=None):
    """The fleet part of report.html: a summary per platform, filters (verdict, platform, host
    name; inline script, nothing fetched), and one row per host, failing hosts first, each
    linking to its page. ``rows``: {host: fleet_row(...)} built already."""
    summ = platform_summary(docs)
    out = ["<h2 id=\"fleet\">Fleet</h2><h3>Per platform</h3><table id=\"platforms\"><tr><th>platform</th><th>hosts</th>%s"
           "<th>of the PASS, with a %s</th></tr>" % ("".join("<th>%s</th>" % _badge(k) for k in HOST_VERDICTS), _badge("WARN"))]
    for platform, row in sorted(summ.items()):
        out.append("<tr data-platform=\"%s\"><td>%s</td><td>%d</td>%s<td>%d</td></tr>" % (
            _e(platform), _e(platform), row["hosts"], "".join("<td>%d</td>" % row[k] for k in HOST_VERDICTS), row["warned"]))
    out.append("</table>")
    out.append("<div class=\"filters\"><label>verdict <select id=\"filter-verdict\"><option value=\"\">all</option>"
               "<option value=\"not-pass\">not PASS</option>%s</select></label>"
               "<label>platform <select id=\"filter-platform\"><option value=\"\">all</option>%s</select></label>"
               "<label>host <input id=\"filter-host\" type=\"search\" placeholder=\"name contains\"></label>"
               "<span id=\"filter-count\">%d of %d hosts</span></div>" % (
                   "".join("<option value=\"%s\">%s</option>" % (k, k + (" (PASS with a warning)" if k == "WARN" else ""))
                           for k in FLEET_ORDER),
                   "".join("<option value=\"%s\">%s</option>" % (_e(p), _e(p)) for p in sorted(summ)),
                   len(docs), len(docs)))
    out.append("<table id=\"fleet-table\"><thead><tr><th>host</th><th>verdict</th><th>platform</th><th>first problem</th>"
               "<th>GPUs</th><th>data drives</th><th>groups</th><th>checks</th><th>reboot required</th></tr></thead><tbody>")
    ordered = sorted(docs.items(), key=lambda item: (FLEET_ORDER.get(fleet_status(item[1]), 0), natural_key(item[0])))
    out += [(rows or {}).get(name) or fleet_row(name, doc) for name, doc in ordered]
    out.append("</tbody></table>")
    return "".join(out)


def fleet_row(name, doc):
    """One host's row of the fleet table."""
    topo = doc.get("topology") or {}
    tally = {}
    for check in doc["checks"]:
        tally[check["verdict"]] = tally.get(check["verdict"], 0) + 1
    problem = first_problem(doc)
    status = fleet_status(doc)
    return ("<tr data-host=\"%s\" data-verdict=\"%s\" data-platform=\"%s\"><td><a href=\"%s\">%s</a></td>"
            "<td>%s</td><td>%s</td><td class=\"problem\">%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
                _e(name), _e(status), _e(doc.get("profile") or UNKNOWN_PLATFORM), _e(quote(host_page_name(name))), _e(name),
                _badge(doc["verdict"]) + (" " + _badge("WARN") if status == "WARN" else ""),
                _e(doc.get("profile") or UNKNOWN_PLATFORM),
                _e("%s: %s" % (problem["name"], problem.get("detail") or problem.get("actual"))) if problem else "",
                len(topo.get("gpus") or []), len([d for d in topo.get("nvme") or [] if not d.get("system")]),
                len(topo.get("groups") or []), " ".join("%s&nbsp;%d" % (_e(k), v) for k, v in sorted(tally.items())),
                "yes" if doc.get("reboot_required") else "no"))


# The fleet filters; the page's query string presets them (report.html?verdict=FAIL&platform=dgx_a100).
FLEET_JS = """
(function () {
  var verdict = document.getElementById('filter-verdict');
  var platform = document.getElementById('filter-platform');
  var host = document.getElementById('filter-host');
  var count = document.getElementById('filter-count');
  if (!verdict) { return; }
  var rows = Array.prototype.slice.call(document.querySelectorAll('#fleet-table tbody tr'));
  function apply() {
    var v = verdict.value, p = platform.value, h = host.value.toLowerCase(), shown = 0;
    rows.forEach(function (row) {
      var d = row.getAttribute('data-verdict');
      var ok = (!v || (v === 'not-pass' ? d !== 'PASS' : d === v)) &&
               (!p || row.getAttribute('data-platform') === p) &&
               (!h || row.getAttribute('data-host').toLowerCase().indexOf(h) >= 0);
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    count.textContent = shown + ' of ' + rows.length + ' hosts';
  }
  var query = new URLSearchParams(window.location.search);
  [['verdict', verdict], ['platform', platform], ['host', host]].forEach(function (pair) {
    if (query.has(pair[0])) { pair[1].value = query.get(pair[0]); }
  });
  [verdict, platform].forEach(function (el) { el.addEventListener('change', apply); });
  host.addEventListener('input', apply);
  apply();
  if (window.performance && performance.mark) { performance.mark('gds-filters-ready'); }  // tests/perf measures it
})();
"""


HEALTH_AREAS = ("pcie", "nvme", "gpu")


def links_html(doc):
    """The PCIe link table of every affinity group (root port first, down to the devices) and of
    the links in no group, the degraded hops highlighted and named."""
    links = doc.get("pcie_links") or []
    if not links:
        return ""
    topo = doc.get("topology") or {}
    by_bdf = {link["bdf"]: link for link in links}
    out = ["<h3>PCIe links</h3>"]
    placed = set()
    for group in topo.get("groups") or []:
        rows = [by_bdf[b] for b in group_path(group, topo, by_bdf)]
        placed.update(link["bdf"] for link in rows)
        if rows:
            out.append(_links_table("group %s" % group.get("id"), rows))
    rest = [link for link in links if link["bdf"] not in placed]
    if rest:
        out.append(_links_table("in no group" if placed else "all links", rest))
    return "".join(out)


def _links_table(title, rows):
    slow = [link["slow"] for link in rows if link.get("slow")]
    out = ["<h4>%s</h4>" % _e(title)]
    if slow:
        out.append("<p class=\"slow\">degraded: %s</p>" % "; ".join(_e(s) for s in slow))
    shown, runs = folds(rows, reason_of=lambda link: fold_reason({"detail": link.get("detail")}))
    out.append(_link_rows(shown) if shown else "")
    out += [folded(label.replace("PASS", "links PASS", 1), _link_rows(group)) for label, group in runs]
    return "".join(out)


def _link_rows(rows):
    out = ["<table><tr><th>function</th><th>PCI address</th><th>upstream port</th><th>current</th><th>max</th>"
           "<th>expected</th><th>verdict</th><th>detail</th></tr>"]
    for link in rows:
        out.append("<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"detail\">%s</td></tr>" % (
            ' class="slow"' if link.get("slow") else "", _e(link["role"]), _e(link["bdf"]), _e(link.get("upstream") or "-"),
            _e(link_state(link.get("current_width"), link.get("current_speed_gts"))),
            _e(link_state(link.get("max_width"), link.get("max_speed_gts"))),
            _e(link_state(link.get("expected_width"), link.get("expected_speed_gts"))),
            _badge(link["verdict"]), _e(link.get("slow") or link.get("detail") or "")))
    out.append("</table>")
    return "".join(out)


def folded(title, table):
    return "<details class=\"fold\"><summary>%s</summary>%s</details>" % (_e(title), table)


def _check_rows(checks):
    rows = ["<table><tr><th>check</th><th>verdict</th><th>expected</th><th>actual</th><th>detail</th></tr>"]
    for check in checks:
        rows.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td class=\"detail\">%s</td></tr>" % (
            _e(check["name"]), _badge(check["verdict"]), _e(check.get("expected")), _e(check.get("actual")),
            _e(check.get("detail", ""))))
    rows.append("</table>")
    return "".join(rows)


def _check_table(checks):
    shown, runs = folds(checks)
    return (_check_rows(shown) if shown else "") + "".join(folded(title, _check_rows(rows)) for title, rows in runs)


# --------------------------------------------------------------------------------------------
# Network (GPUDirect RDMA): NICs, ports, GPU pairing, RDMA benchmark results
# --------------------------------------------------------------------------------------------
def _rdma_checks(checks, **about):
    """The rdma: checks of the node's settings (no ``metric``: not a benchmark row) that are about
    ``about`` (gpu=0, nic="mlx5_0", port=1: their keys)."""
    return [c for c in checks or [] if c.get("area") == "rdma" and c.get("metric") is None
            and all(c.get(k) == v for k, v in about.items())]


def _paired_gpus(topology):
    """{NIC name: [GPU index]}: the GPUs paired with each NIC (hw/affinity.paired_nics, the one rule)."""
    out = {}
    for gpu, names in paired_nics(topology).items():
        for nic in names:
            out.setdefault(nic, []).append(gpu)
    return out


def network_rows(doc):
    """One row per RDMA port: NIC, port, netdev, state, rate, the NIC's PCIe link, paired GPUs and
    the verdict of its ``rdma: port`` check."""
    topo = doc.get("topology") or {}
    links = {link.get("bdf"): link for link in doc.get("pcie_links") or topo.get("pcie_links") or []
             if isinstance(link, dict)}
    checks = doc.get("checks")
    paired = _paired_gpus(topo)
    rows = []
    for nic in topo.get("nics") or []:
        link = links.get(nic.get("bdf")) or {}
        pcie = "%s (%s)" % (nic.get("bdf"), link_state(link.get("current_width"), link.get("current_speed_gts"))) \
            if link else nic.get("bdf")
        for port in nic.get("ports") or [{}]:
            rows.append({
                "nic": nic.get("name") + (" (software)" if nic.get("software") else ""),
                "port": port.get("port", "-"), "netdev": port.get("netdev") or nic.get("netdev") or "-",
                "link_layer": port.get("link_layer") or "-",
                "state": "%s / %s" % (port.get("state") or "?", port.get("phys_state") or "?") if port else "-",
                "rate": "%s Gb/s" % figure_text(port["rate_gbps"], "%g") if port.get("rate_gbps") is not None else "-",
                "pcie": pcie, "numa": nic.get("numa_node"), "fw": nic.get("fw_ver") or "-",
                "gpus": ", ".join("GPU%s" % i for i in paired.get(nic.get("name"), [])) or "-",
                "verdict": worst([c["verdict"] for c in _rdma_checks(checks, nic=nic.get("name"), port=port.get("port"))],
                                 default=None),
            })
    return rows


def pairing_rows(doc):
    """One row per GPU: its best NIC, the link class and the verdict of its pairing check."""
    topo = doc.get("topology") or {}
    checks = doc.get("checks")
    nics = {n.get("name"): n for n in topo.get("nics") or []}
    rows = []
    for gpu in topo.get("gpus") or []:
        best = (gpu.get("nics") or [None])[0]
        rows.append({"gpu": "GPU%s" % gpu.get("index"), "gpu_bdf": gpu.get("bdf"), "nic": best or "-",
                     "nic_bdf": (nics.get(best) or {}).get("bdf") or "-", "link": gpu.get("nic_link") or "-",
                     "verdict": worst([c["verdict"] for c in _rdma_checks(checks, gpu=gpu.get("index"))],
                                      default=None)})
    return rows


def rdma_bench_rows(doc):
    """The RDMA benchmark results (perftest/OSU) with measured Gb/s against the threshold, and
    the GPU-memory figure as a share of the host-memory one of the same NIC, port and test."""
    results = [r for r in doc.get("rdma_bench") or [] if isinstance(r, dict)]
    host = {(r.get("nic"), r.get("port"), r.get("test")): r.get("gbps") for r in results
            if r.get("memory") == "host" and is_figure(r.get("gbps"))}
    rows = []
    for r in results:
        gbps = r.get("gbps")
        share = share_text(gbps, host.get((r.get("nic"), r.get("port"), r.get("test")))) if r.get("memory") == "cuda" else "-"
        gpu = "-" if r.get("gpu") is None else "GPU%s%s" % (r.get("gpu"), "" if r.get("affine") in (None, True) else " (far)")
        rows.append({"nic": r.get("nic"), "port": r.get("port"), "test": r.get("test"), "memory": r.get("memory"),
                     "gpu": gpu, "gbps": table_figure(gbps), "lat_us": table_figure(r.get("lat_us")),
                     "threshold": table_figure(r.get("threshold_gbps")), "vs_host": share, "verdict": r.get("verdict"),
                     "reason": r.get("reason") or ""})
    return rows


def network_html(doc):
    """The network section of a host: RDMA ports, GPU-NIC pairing, RDMA benchmark results."""
    ports, pairs, bench = network_rows(doc), pairing_rows(doc), rdma_bench_rows(doc)
    if not ports and not bench:
        return ""
    out = ["<h3>Network (GPUDirect RDMA)</h3>"]
    if ports:
        shown, runs = folds(ports, reason_of=lambda row: "")
        out.append(_port_rows(shown) if shown else "")
        out += [folded(label.replace("PASS", "ports PASS", 1).rstrip(": "), _port_rows(group)) for label, group in runs]
    if ports and pairs:
        out.append("<h4>GPU-NIC pairing</h4><table><tr><th>GPU</th><th>GPU PCIe</th><th>best NIC</th><th>NIC PCIe</th>"
                   "<th>link</th><th>verdict</th></tr>")
        for row in pairs:
            out.append("<tr>%s<td>%s</td></tr>" % ("".join("<td>%s</td>" % _e(row[k]) for k in (
                "gpu", "gpu_bdf", "nic", "nic_bdf", "link")), _badge(row["verdict"]) if row["verdict"] else "-"))
        out.append("</table>")
    if bench:
        out.append("<h4>RDMA benchmarks (host vs GPU memory)</h4>")
        shown, runs = folds(bench, reason_of=lambda row: fold_reason({"detail": row.get("reason")}))
        out.append(_rdma_bench_rows(shown) if shown else "")
        out += [folded(label, _rdma_bench_rows(group)) for label, group in runs]
    return "".join(out)


def _rows_table(headers, keys, rows, detail=None):
    """A table of ``rows`` (dicts): a column a key, then the verdict's badge, then ``detail``'s text."""
    out = ["<table><tr>%s</tr>" % "".join("<th>%s</th>" % header for header in headers)]
    for row in rows:
        cells = "".join("<td>%s</td>" % _e(row[k]) for k in keys)
        cells += "<td>%s</td>" % (_badge(row["verdict"]) if row["verdict"] else "-")
        if detail:
            cells += "<td class=\"detail\">%s</td>" % _e(row[detail])
        out.append("<tr>%s</tr>" % cells)
    out.append("</table>")
    return "".join(out)


def _port_rows(ports):
    return _rows_table(("NIC", "port", "netdev", "link layer", "state", "rate", "PCIe", "NUMA", "firmware",
                        "paired GPUs", "verdict"),
                       ("nic", "port", "netdev", "link_layer", "state", "rate", "pcie", "numa", "fw", "gpus"), ports)


def _rdma_bench_rows(rows):
    return _rows_table(("NIC", "port", "test", "memory", "GPU", "Gb/s", "latency us", "threshold Gb/s", "GPU vs host",
                        "verdict", "reason"),
                       ("nic", "port", "test", "memory", "gpu", "gbps", "lat_us", "threshold", "vs_host"), rows, "reason")
