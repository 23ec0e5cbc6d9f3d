# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's results as a Prometheus textfile-collector file (docs/reports.md#metrics).

node_exporter's textfile collector reads every ``*.prom`` file of its directory on each scrape:
a file must be complete (written atomically), carry no sample timestamps, and keep each metric
family in one block with its HELP and TYPE lines. Commission and drift runs write separate files
(``gds_commission.prom``, ``gds_commission_drift.prom``) with distinct metric names, so a nightly
drift run never hides the last commissioning verdict.
"""
from __future__ import annotations

import hashlib
import math
import re

from ansible_collections.gds.commission.plugins.module_utils.core.checks import VERDICTS, rank
from ansible_collections.gds.commission.plugins.module_utils.core.files import printable
from ansible_collections.gds.commission.plugins.module_utils.fleet.output import OutDir

VERSION = "1.0.0"
PREFIX = "gds_commission_"
COMMISSION_FILE = "gds_commission.prom"
DRIFT_FILE = "gds_commission_drift.prom"
# a label value longer than this is cut (and made unique by a hash of the whole): a scrape with
# label_value_length_limit set rejects the whole file for one long value
LABEL_MAX = 1024

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class MetricsError(ValueError):
    """A metric or label name the exposition format does not allow; the message names it."""


def escape_label(value):
    """A label value as the exposition format quotes it: backslash, double quote and line feed
    escaped. Bytes that are not UTF-8 (lone surrogates from sysfs) become U+FFFD, other control
    characters their escape (``\\x1b``); a value over LABEL_MAX characters is cut."""
    text = "" if value is None else str(value)
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    text = printable(text)
    if len(text) > LABEL_MAX:
        digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:12]
        text = "%s...%s" % (text[:LABEL_MAX - 15], digest)
    return text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def escape_help(text):
    return printable(text).replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value):
    """A sample value: integers as such, floats in Go's notation for the specials; None for what
    no sample can hold (not a number, an integer beyond the range of a float)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if not isinstance(value, (int, float)):
        return None
    try:
        as_float = float(value)
    except OverflowError:
        return None  # Prometheus parses every value as a float64: 10**400 would break the file
    if isinstance(value, int):
        return str(value)
    if math.isnan(as_float):
        return "NaN"
    if math.isinf(as_float):
        return "+Inf" if as_float > 0 else "-Inf"
    return repr(as_float)


class Exposition(object):
    """Metric families in the order they were declared, each with its samples."""

    def __init__(self):
        self.families = []
        self._by_name = {}
        self.skipped = 0  # samples left out: their value is no number a sample can hold

    def family(self, name, help_text, kind="gauge"):
        if not _NAME.match(name):
            raise MetricsError("invalid metric name %r" % name)
        if name not in self._by_name:
            fam = {"name": name, "help": help_text, "type": kind, "samples": {}}
            self._by_name[name] = fam
            self.families.append(fam)
        return self._by_name[name]

    def add(self, name, labels, value):
        fam = self._by_name[name]
        for key in labels:
            if not _LABEL.match(key) or key.startswith("__"):
                raise MetricsError("invalid label name %r of metric %s" % (key, name))
        text = format_value(value)
        if text is None:
            self.skipped += 1
            return
        key = tuple(sorted((k, escape_label(v)) for k, v in labels.items()))
        fam["samples"].setdefault(key, text)  # one series per label set: the first one wins

    def text(self):
        out = []
        for fam in self.families:
            if not fam["samples"]:
                continue
            out.append("# HELP %s %s" % (fam["name"], escape_help(fam["help"])))
            out.append("# TYPE %s %s" % (fam["name"], fam["type"]))
            for key in sorted(fam["samples"]):
                labels = ",".join('%s="%s"' % kv for kv in key)
                out.append("%s%s %s" % (fam["name"], "{%s}" % labels if labels else "", fam["samples"][key]))
        return "\n".join(out) + "\n" if out else ""


def area_of(check):
    """A check's area, as the record carries it (core/checks.check sets it, the report's door
    fleet/report_inputs.normalize_check for older records); ``check`` without one."""
    area = check.get("area") if isinstance(check, dict) else None
    return area if isinstance(area, str) and area else "check"


def area_verdicts(checks):
    """{area: verdict}: the worst verdict of the area's checks (SKIP only when nothing in it was
    measured)."""
    out = {}
    for check in checks:
        area, verdict = area_of(check), check.get("verdict", "ERROR")
        if area not in out or rank(verdict) > rank(out[area]):
            out[area] = verdict
    return out


def bench_series(doc):
    """(labels, check) for every measured benchmark figure of a host document: labels bench_job,
    metric, unit, gpu and array (the md device, else the mount's last part). Not ``job``: the
    scrape's own job label would push it aside as ``exported_job``."""
    gpus, arrays = _job_places(doc)
    out = []
    for check in doc.get("checks") or []:
        job, metric = check.get("job"), check.get("metric")  # a threshold check of a benchmark job
        if check.get("area") != "bench" or not isinstance(job, str) or not isinstance(metric, str):
            continue
        actual = check.get("actual")
        if not isinstance(actual, (int, float)) or isinstance(actual, bool):
            continue
        out.append(({"bench_job": job, "metric": metric, "unit": check.get("unit") or "",
                     "gpu": gpus.get(job, ""), "array": arrays.get(job, "")}, check))
    return out


def _job_places(doc):
    """{job: GPU index} from each job's gdsbench command line (-d), {job: array} from its target."""
    by_mount = {}
    for array in doc.get("arrays") or []:
        if isinstance(array, dict) and array.get("mount"):
            by_mount[str(array["mount"]).rstrip("/")] = array.get("device") or array["mount"]
    gpus, arrays = {}, {}
    for result in doc.get("bench") or []:
        if not isinstance(result, dict) or not result.get("name"):
            continue
        job, cmd = result["name"], [str(a) for a in result.get("cmd") or []]
        for flag, value in zip(cmd, cmd[1:]):
            if flag == "-d":
                gpus[job] = value
            elif flag in ("-D", "-f"):
                target = value.rstrip("/")
                mount = next((m for m in sorted(by_mount, key=len, reverse=True)
                              if target == m or target.startswith(m + "/")), None)
                if mount:
                    arrays[job] = by_mount[mount]
        if job not in arrays and " " in job:  # the planner names a job "<mount's last part> <template>"
            arrays[job] = job.split(" ", 1)[0]
    return gpus, arrays


def _skipped(exp, prefix):
    """The count of samples left out (only when there are some), so the rest of the file stands."""
    exp.family(prefix + "skipped_samples", "Samples left out: their value was no number Prometheus can hold")
    if exp.skipped:
        exp.add(prefix + "skipped_samples", {}, exp.skipped)


def _header(prefix, run, timestamp, version):
    """A new file's first two families: the tool's version (info) and when the run finished."""
    exp = Exposition()
    exp.family(prefix + "info", "gds-commission that wrote this file (value always 1)")
    exp.add(prefix + "info", {"version": version}, 1)
    exp.family(prefix + "last_run_timestamp_seconds", "When the last %s finished (Unix time)" % run)
    exp.add(prefix + "last_run_timestamp_seconds", {}, float(timestamp))
    return exp


def commission_metrics(doc, timestamp, version=VERSION):
    """The textfile of one host's commissioning result (its HOST.json document)."""
    exp = _header(PREFIX, "commissioning run", timestamp, version)
    exp.family(PREFIX + "verdict", "The node's verdict: 1 for the current one, 0 for the others")
    for verdict in VERDICTS:
        exp.add(PREFIX + "verdict", {"verdict": verdict}, int(doc.get("verdict") == verdict))
    exp.family(PREFIX + "area_verdict", "Each check area's verdict (its worst check): 1 for the current one")
    for area, current in sorted(area_verdicts(doc.get("checks") or []).items()):
        for verdict in VERDICTS:
            exp.add(PREFIX + "area_verdict", {"area": area, "verdict": verdict}, int(current == verdict))
    exp.family(PREFIX + "checks", "Checks of the last run by area and verdict")
    tally = {}
    for check in doc.get("checks") or []:
        key = (area_of(check), check.get("verdict", "ERROR"))
        tally[key] = tally.get(key, 0) + 1
    for (area, verdict), count in sorted(tally.items()):
        exp.add(PREFIX + "checks", {"area": area, "verdict": verdict}, count)
    families = (("bench_value", "Measured benchmark figure", "actual"),
                ("bench_threshold_low", "Lower bound of the benchmark figure (a lower value FAILs)", "low"),
                ("bench_threshold_high", "Upper bound of the benchmark figure (a higher value FAILs)", "high"),
                ("bench_reference", "Reference of the benchmark figure in the platform profile", "reference"))
    for suffix, help_text, _key in families:
        exp.family(PREFIX + suffix, help_text)
    exp.family(PREFIX + "bench_pass", "1 when the benchmark figure is within its thresholds (PASS or WARN)")
    for labels, check in bench_series(doc):
        for suffix, _help, key in families:
            value = check.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                exp.add(PREFIX + suffix, labels, value)
        exp.add(PREFIX + "bench_pass", labels, int(check.get("verdict") in ("PASS", "WARN")))
    _skipped(exp, PREFIX)
    return exp.text()


def drift_metrics(entry, timestamp, version=VERSION):
    """The textfile of one host's drift check (its drift.json entry)."""
    exp = _header(PREFIX + "drift_", "drift check", timestamp, version)
    exp.family(PREFIX + "drift_checked", "1 when the last drift check completed on this node")
    exp.add(PREFIX + "drift_checked", {}, int(entry.get("drifted") is not None))
    items = entry.get("items") or []
    items = items if isinstance(items, list) else [items]
    exp.family(PREFIX + "drift_items", "Settings that differ from the commissioned state")
    written = exp.family(PREFIX + "drift_item", "One drifted setting (value always 1)")
    for item in items:
        setting = item.get("setting") if isinstance(item, dict) else item
        exp.add(PREFIX + "drift_item", {"setting": "" if setting is None else setting}, 1)
    # the settings written above, one series each: the count never names more than the file holds
    exp.add(PREFIX + "drift_items", {}, len(written["samples"]))
    _skipped(exp, PREFIX + "drift_")
    return exp.text()


def write_textfile(directory, name, text):
    """Put ``text`` in place as ``directory/name`` atomically (node_exporter never reads half);
    a link or anything but a regular file of that name is refused, and so is a link in the
    directory's own place (fleet/output.py): never written through."""
    with OutDir(directory, follow=False) as folder:
        return folder.write(name, text)
