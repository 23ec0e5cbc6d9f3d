# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark figures against thresholds, and the I/O path against the one a profile expects.

Thresholds are written like ReFrame's references, so a profile reads like a table:

    throughput_gib_s: [6.0, -0.10, null, GiB/s]   # reference, lower, upper (fractions), unit
    lat_us.mean:      [1200, null, 0.50, us]      # at most 50 % above 1200 us

A bound of ``null`` is open. A value beyond a bound FAILs; a value inside but within
``WARN_MARGIN`` (5 %) of a bound WARNs, so a node that only just passes is visible; a metric the
record lacks, or holds as no finite figure >= 0 (NaN, infinity, a negative number), is an ERROR
(nothing was measured, so nothing can be signed off).
"""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check as _check
# every metric here (throughput, IOPS, latency, bytes, seconds, ratios) is a figure >= 0
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import PLAUSIBLE_MAX, figure
from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import CUFILE_XFER_TYPES

WARN_MARGIN = 0.05
# A drive's spec (GiB/s, or IOPS) below this is a slip of unit or typing, no drive: as the divisor
# of fraction_of_spec and a bound of the path's limit (measure/pathlimit.py) it would pass anything
DRIVE_SPEC_MIN = 0.01


class ThresholdError(ValueError):
    """A threshold entry is malformed; the message names the metric."""


def parse_reference(metric, spec):
    """[ref, lower, upper, unit?] (or a dict with those keys) -> (ref, lower, upper, unit)."""
    if isinstance(spec, dict):
        spec = [spec.get("ref"), spec.get("lower"), spec.get("upper"), spec.get("unit")]
    if not isinstance(spec, (list, tuple)) or len(spec) not in (3, 4):
        raise ThresholdError("threshold %s: expected [reference, lower, upper, unit?], got %r" % (metric, spec))
    ref, lower, upper = spec[0], spec[1], spec[2]
    unit = spec[3] if len(spec) == 4 else ""
    try:
        ref = float(ref)
        lower = None if lower is None else float(lower)
        upper = None if upper is None else float(upper)
    except (TypeError, ValueError):
        raise ThresholdError("threshold %s: reference and bounds must be numbers or null, got %r" % (metric, spec))
    if lower is None and upper is None:
        raise ThresholdError("threshold %s: at least one of lower/upper must be set" % metric)
    if (lower is not None and lower > 0) or (upper is not None and upper < 0):
        raise ThresholdError("threshold %s: lower must be <= 0 and upper >= 0 (fractions of the reference)" % metric)
    return ref, lower, upper, unit or ""


def lookup_metric(record, metric):
    """Dotted lookup (``lat_us.p99``) in a benchmark record; None when absent."""
    value = record
    for part in metric.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _fmt(value):
    return float("%.4g" % value)


def drive_spec_error(spec):
    """Why ``spec``, one [metric, value] of the profile's gds_bench_drive_spec, is unusable; None
    when it is fine."""
    if not isinstance(spec, (list, tuple)) or len(spec) != 2:
        return "must be [metric, value], such as [throughput_gib_s, 6.5]"
    metric, value = spec
    if not isinstance(metric, str) or not metric:
        return "metric %r must be a metric name such as throughput_gib_s or iops" % (metric,)
    if figure(value) is None or value < DRIVE_SPEC_MIN:
        return "value %r must be a finite number >= %g (GiB/s or IOPS of one drive)" % (value, DRIVE_SPEC_MIN)
    return None


def evaluate(metric, spec, value, prefix=""):
    """One check: {name, verdict, expected, actual, detail}."""
    ref, lower, upper, unit = parse_reference(metric, spec)
    low = None if lower is None else ref * (1 + lower)
    high = None if upper is None else ref * (1 + upper)
    expected = " and ".join(part for part in (
        ">= %g %s" % (_fmt(low), unit) if low is not None else "",
        "<= %g %s" % (_fmt(high), unit) if high is not None else "") if part).replace("  ", " ").strip()
    # the metric as data: readers (the fleet and history checks, the metrics) find it by this key
    limits = dict(unit=unit, reference=ref, low=low, high=high, metric=metric)
    if value is None:
        return _check(prefix + metric, "ERROR", expected, None, "the benchmark record has no %s" % metric, **limits)
    if figure(value) is None:
        return _check(prefix + metric, "ERROR", expected, str(value),
                      "the benchmark record's %s is %r, not a finite figure >= 0: nothing to judge" % (metric, value),
                      **limits)
    if value > PLAUSIBLE_MAX:
        return _check(prefix + metric, "ERROR", expected, _fmt(value),
                      "the benchmark record's %s is %g %s, above anything a node measures (%g): a record "
                      "gone wrong, nothing to judge" % (metric, value, unit, PLAUSIBLE_MAX), **limits)
    verdict, detail = "PASS", None
    if low is not None and value < low:
        verdict, detail = "FAIL", "%g %s is below %g" % (_fmt(value), unit, _fmt(low))
    elif high is not None and value > high:
        verdict, detail = "FAIL", "%g %s is above %g" % (_fmt(value), unit, _fmt(high))
    elif low is not None and value < low * (1 + WARN_MARGIN):
        verdict, detail = "WARN", "within %d%% of the lower bound %g" % (WARN_MARGIN * 100, _fmt(low))
    elif high is not None and value > high * (1 - WARN_MARGIN):
        verdict, detail = "WARN", "within %d%% of the upper bound %g" % (WARN_MARGIN * 100, _fmt(high))
    return _check(prefix + metric, verdict, expected, _fmt(value), detail, **limits)


def evaluate_all(record, thresholds, prefix=""):
    """Checks for every metric of a job's thresholds (sorted by metric name)."""
    return [evaluate(metric, spec, lookup_metric(record, metric), prefix)
            for metric, spec in sorted((thresholds or {}).items())]


def path_check(record, xfer_type, expected_mode, prefix=""):
    """The I/O path actually taken against the profile's; None when nothing is expected.

    Only GPU-direct transfer types are judged: a cuFile run that fell back to compat mode FAILs
    with the benchmark's evidence, whatever its throughput.
    """
    if not expected_mode or int(xfer_type) not in CUFILE_XFER_TYPES:
        return None
    path = record.get("path") or {}
    path = path if isinstance(path, dict) else {"evidence": "unreadable path record: %r" % (path,)}
    mode = path.get("mode")
    evidence = path.get("evidence")
    if isinstance(evidence, (list, tuple)):
        evidence = "; ".join(str(e) for e in evidence)
    elif isinstance(evidence, dict):
        evidence = "; ".join("%s=%s" % item for item in sorted(evidence.items()))
    verdict = "PASS" if mode == expected_mode else ("ERROR" if mode is None else "FAIL")
    return _check(prefix + "io path", verdict, expected_mode, mode,
                  evidence or ("the record has no path" if mode is None else None))


# --------------------------------------------------------------------------------------------
# One benchmark job: did it measure anything, and what may be judged from it
# --------------------------------------------------------------------------------------------
def moved_bytes(record):
    """Bytes the job moved, 0 when the record lacks the figure, None when it holds no figure
    (NaN, infinity, a negative number)."""
    value = lookup_metric(record or {}, "bytes")
    if value is None:
        return 0
    return int(value) if figure(value) is not None else None


def run_check(prefix, record, failure=None, stderr=""):
    """The job's own check: it ran to the end (exit 0) and moved bytes, or why it did not.

    A job that exited non-zero, crashed, timed out or moved no bytes measured nothing: ERROR,
    with the benchmark's own stderr as the detail.
    """
    record = record or {}
    moved = moved_bytes(record)
    exit_code = record.get("exit_code")
    if failure is None and exit_code not in (None, 0):
        failure = "exited %s" % exit_code
    expected = "exit 0, bytes moved"
    if failure:
        actual = "%s, %s bytes" % (failure.split(":", 1)[0], moved)
        return _check(prefix + "run", "ERROR", expected, actual,
                      "; ".join(part for part in (failure, (stderr or "").strip()) if part) or None)
    if moved is None:
        return _check(prefix + "run", "ERROR", expected, "exit 0, bytes unknown",
                      "the record's bytes is %r, not a count of bytes: nothing was measured"
                      % ((record or {}).get("bytes"),))
    if moved <= 0:
        return _check(prefix + "run", "ERROR", expected, "exit 0, 0 bytes",
                      "the job moved no data: nothing was measured%s"
                      % ("; " + stderr.strip() if (stderr or "").strip() else ""))
    elapsed = figure(lookup_metric(record, "elapsed_s"))
    return _check(prefix + "run", "PASS", expected, "exit 0, %d bytes%s"
                  % (moved, " in %.1f s" % elapsed if elapsed is not None else ""))


def job_checks(job, record, failure=None, stderr=""):
    """All checks of one job: run, thresholds, I/O path, error counters.

    Thresholds and the I/O path are judged only from a job that completed and moved bytes;
    otherwise they SKIP, naming why (no verdict is deduced from a run that measured nothing).
    """
    prefix = "bench: %s: " % job["name"]
    record = record or {}
    run = run_check(prefix, record, failure, stderr)
    checks = [run]
    if run["verdict"] == "PASS":
        spec = job.get("spec")  # {metric, value}: the summed drive spec of the array
        spec = spec if isinstance(spec, dict) else {}
        if figure(spec.get("value")):
            measured = figure(lookup_metric(record, spec.get("metric", "throughput_gib_s")))
            if measured is not None:
                record["fraction_of_spec"] = round(measured / float(spec["value"]), 4)
        checks += evaluate_all(record, job.get("thresholds"), prefix)
        path = path_check(record, job.get("xfer_type", 0), job.get("expect_path"), prefix)
        if path:
            checks.append(path)
    else:
        why = "not judged: the job did not complete (%s)" % run["actual"]
        for metric in sorted(job.get("thresholds") or {}):
            parse_reference(metric, job["thresholds"][metric])  # a malformed threshold still says so
            checks.append(_check(prefix + metric, "SKIP", None, None, why))
        if job.get("expect_path") and int(job.get("xfer_type", 0)) in CUFILE_XFER_TYPES:
            checks.append(_check(prefix + "io path", "SKIP", job["expect_path"], None, why))
    for key in ("errors", "verify_errors"):
        if record.get(key):
            checks.append(_check(prefix + key, "FAIL", 0, record[key],
                                 "the benchmark counted %s" % key.replace("_", " ")))
    return checks


def skipped_job_checks(job, reason):
    """A job that was not run: one SKIP per threshold (or one for the run), with the reason."""
    prefix = "bench: %s: " % job["name"]
    return [_check(prefix + metric, "SKIP", None, None, reason)
            for metric in sorted(job.get("thresholds") or {}) or ["run"]]


def jobs_run_check(ran, planned, reasons=()):
    """None when a job ran; else a FAIL saying that nothing was measured, and why."""
    if ran:
        return None
    why = "; ".join(sorted(set(r for r in reasons if r))) or (
        "no job was planned: no array and no target directory, or an empty job list")
    return _check("bench: jobs run", "FAIL", ">= 1 job run", "0 of %d" % planned,
                  "nothing was measured on this host: %s" % why)


def gpu_skip_check(reason, xfer_types):
    """The GPU transfer types were not run on this host (no usable GPU): SKIP with the reason."""
    return _check("bench: GPU transfer types", "SKIP", "a GPU transfer type",
                  "transfer type %s" % ", ".join(str(x) for x in sorted(set(xfer_types))) if xfer_types else None,
                  "no usable GPU here (%s): ran %s instead" % (
                      reason, "transfer type %s" % ", ".join(str(x) for x in sorted(set(xfer_types)))
                      if xfer_types else "nothing"))
