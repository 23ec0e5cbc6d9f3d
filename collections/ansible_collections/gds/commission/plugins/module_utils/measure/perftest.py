# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPUDirect RDMA measurement: perftest and OSU micro-benchmarks per NIC port, judged against
fractions of the port's rate.

perftest (``ib_write_bw``, ``ib_read_bw``, ``ib_write_lat``) runs as the node's own loopback: a
server process, then a client to 127.0.0.1 on the same device and port, pinned with numactl to
the NIC's NUMA node, with host memory and with GPU memory (``--use_cuda_bus_id`` /
``--use_cuda``) of the GPU closest to the NIC and of a far one (the non-affine penalty). In the
two-node mode the servers run on a peer host and the clients here. Every process has a timeout and
every server is killed when its run ends.

A result row is ``{nic, port, test, memory, gpu, affine, gbps, lat_us, threshold_gbps, verdict,
reason}`` (plus ``link``, ``rate_gbps``, ``lat_us_max``, ``cmd``, ``server_cmd``, ``source``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check, fold_skips
from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, natural_key, read_bounded, read_bytes
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import NOT_A_NUMBER, figure_fault
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import figure as known_figure
from ansible_collections.gds.commission.plugins.module_utils.core.variables import given_int
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import LINK_CLASSES, class_rank
from ansible_collections.gds.commission.plugins.module_utils.core.proc import kill as proc_kill, run as proc_run, start as proc_start
from ansible_collections.gds.commission.plugins.module_utils.core.spec import RoleSpec, Var
from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import WARN_MARGIN, ThresholdError, evaluate

PERFTEST_TESTS = ("ib_write_bw", "ib_read_bw", "ib_write_lat")
BW_TESTS = ("ib_write_bw", "ib_read_bw", "osu_bw")
OSU_TESTS = ("osu_bw", "osu_latency")
TESTS = PERFTEST_TESTS + OSU_TESTS
MEMORIES = ("host", "cuda")
STDERR_TAIL = 1500

# What perftest's --report_gbits / default units mean in Gb/s: perftest's MB and MiB are 2^20
# bytes (its help says so), OSU's MB is 10^6 bytes.
_BW_UNIT_GBPS = {"gb/sec": 1.0, "gbit/sec": 1.0, "mib/sec": 8 * 1048576 / 1e9, "mb/sec": 8 * 1048576 / 1e9}

DEFAULTS = {
    "tests": list(PERFTEST_TESTS) + list(OSU_TESTS),
    "memory": list(MEMORIES),
    "far_gpu": True,
    "perftest_dir": "",
    "osu_dir": "",
    "mpirun": "mpirun",
    "osu_mpirun_args": [],
    "osu_nic_args": ["-x", "UCX_NET_DEVICES={nic}:{port}"],
    "osu_lat_size": 8,
    "bw_fraction": {"default": 0.90},
    "min_gbps": 0.0,
    "lat_us_max": 0.0,
    "affinity_gain": [],
    "msg_size": 65536,
    "duration": 5,
    "lat_iters": 1000,
    "timeout": 60,
    "start_timeout": 15,
    "port_base": 18515,
    "address": "127.0.0.1",
    "peer_address": "",
    "extra_args": [],
    "numactl": "numactl",
    # where procfs is mounted: a server is ready once net/tcp{,6} there lists its port
    "procfs_root": "/proc",
}


# The first TCP port of a plan's runs (each run takes the next): unprivileged, and room below 65535.
PORTS = (1024, 65000)
# a rate key of bw_fraction: Gb/s as digits (YAML's 400 or JSON's "400"), or "default"
_RATE_KEY = re.compile(r"^(default|[0-9]+(\.[0-9]+)?)$")


class BenchError(ValueError):
    """Bad settings or facts; the message names the key and the value."""


# --------------------------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------------------------
_COLUMN = re.compile(r"#\w+|tps average|(?:[\w.%]+ )?[\w.%]+\[[^\]]*\]")
# nan and inf too: C's printf writes them, and a row holding one must be refused, not skipped
_NUMBER = re.compile(r"^[+-]?((\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|nan|inf(inity)?)$", re.IGNORECASE)


def figure(value, where):
    """A measured figure as a float: a number (not a boolean), finite and not negative.
    Raises BenchError naming ``where`` (the JSON key or the table column) and the value."""
    shown = repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    fault = figure_fault(value)
    if fault == NOT_A_NUMBER:
        raise BenchError("%s: %s is not a number" % (where, shown))
    if fault:  # NaN, infinity, an integer beyond float range
        raise BenchError("%s: %s is not a finite number" % (where, shown))
    if value < 0:
        raise BenchError("%s: %s is negative" % (where, shown))
    return float(value)


def parse_perftest_text(text):
    """perftest's result table: {columns, rows: [{column: number}], tables}; rows empty when none.

    The header (`` #bytes     #iterations    BW peak[Gb/sec] ...`` or the latency one) names the
    columns; a result row is a line of numbers, one per column (a trailing CPU-utilisation
    column may follow). Each row holds the columns of the header above it; ``tables`` counts
    the headers with rows below them (one run prints one).
    """
    columns, rows, tables = [], [], 0
    for line in (text or "").splitlines():
        stripped = line.strip()
        if stripped.startswith("#bytes") or stripped.startswith("#flows"):
            columns, counted = _COLUMN.findall(stripped), False
            continue
        if not columns:
            continue
        fields = stripped.split()
        if len(fields) >= len(columns) and all(_NUMBER.match(f) for f in fields[:len(columns)]):
            rows.append(dict(zip(columns, (float(f) for f in fields))))
            if not counted:
                tables, counted = tables + 1, True
    return {"columns": columns, "rows": rows, "tables": tables}


def _bw_gbps(row):
    """The average bandwidth of a perftest row in Gb/s, from the unit in its column name."""
    for column, value in row.items():
        match = re.match(r"BW average\[([^\]]*)\]$", column)
        if match:
            factor = _BW_UNIT_GBPS.get(match.group(1).lower())
            if factor is None:
                raise BenchError("perftest column %r: unknown bandwidth unit" % column)
            return figure(value, "perftest column %r" % column) * factor
    raise BenchError("perftest table has no 'BW average[<unit>]' column (columns: %s)" % ", ".join(row))


def _largest_size_row(table):
    """The row of the largest message size of the one result table; BenchError when the output
    is ambiguous (two tables, or one size twice): which figure is the run's is not known, and
    none is chosen."""
    rows = table["rows"]
    if table.get("tables", 1) > 1:
        raise BenchError("perftest printed %d result tables: which one is this run's is ambiguous"
                         % table["tables"])
    sizes = [figure(r.get("#bytes", 0), "perftest column '#bytes'") for r in rows]
    largest = max(sizes)
    if sizes.count(largest) > 1:
        raise BenchError("perftest printed %d rows for %d bytes: which one is this run's is ambiguous"
                         % (sizes.count(largest), int(largest)))
    return rows[sizes.index(largest)], int(largest)


def parse_perftest_json(text):
    """The ``results`` object of perftest's --out_json file; raises BenchError when unreadable."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BenchError("perftest JSON report is not valid JSON: %s" % exc)
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, dict):
        raise BenchError("perftest JSON report has no results object")
    return {"test_info": data.get("test_info") or {}, "results": results}


_JSON_LAT = ("t_typical", "t_avg", "avg_lat")
_JSON_BW = ("BW_average", "bw_avg")


def perftest_result(test, stdout="", json_text=None, gbits=True):
    """{gbps, lat_us, msg_size, source} of one perftest run, from its JSON report when it has a
    usable one, else from the text table on stdout; None when neither holds a result.

    The JSON report carries no unit: its bandwidth is Gb/s with --report_gbits, else MiB/s.
    Raises BenchError naming the key or column when the figure is not a finite number >= 0 or
    its unit is unknown: that row is an ERROR, not a pass.
    """
    latency = test.endswith("_lat")
    if json_text:
        try:
            results = parse_perftest_json(json_text)["results"]
        except BenchError:
            results = {}
        key = next((k for k in (_JSON_LAT if latency else _JSON_BW) if k in results), None)
        if key is not None:
            value = figure(results[key], "perftest JSON report: results.%s" % key)
            size = results.get("MsgSize")
            size = size if isinstance(size, int) and not isinstance(size, bool) else None
            if latency:
                return {"gbps": None, "lat_us": value, "msg_size": size, "source": "json"}
            factor = 1.0 if gbits else _BW_UNIT_GBPS["mib/sec"]
            return {"gbps": round(value * factor, 3), "lat_us": None, "msg_size": size, "source": "json"}
    table = parse_perftest_text(stdout)
    if not table["rows"]:
        return None
    row, size = _largest_size_row(table)
    if latency:
        column = next((c for c in ("t_typical[usec]", "t_avg[usec]") if c in row), None)
        if column is None:
            raise BenchError("perftest table has no 't_typical[usec]' or 't_avg[usec]' column "
                             "(columns: %s)" % ", ".join(row))
        return {"gbps": None, "lat_us": figure(row[column], "perftest column %r" % column),
                "msg_size": size, "source": "text"}
    return {"gbps": round(_bw_gbps(row), 3), "lat_us": None, "msg_size": size, "source": "text"}


def parse_osu(text):
    """An OSU micro-benchmark table: {title, buffers, column, unit, rows: [(size, value)], tables}.

    ``# Size      Bandwidth (MB/s)`` or ``# Size          Latency (us)`` (``Avg Latency(us)`` in
    OMB 7) heads the rows; ``# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)`` says
    where the buffers were. ``tables`` counts the headers (one run prints one).
    """
    out = {"title": None, "buffers": None, "column": None, "unit": None, "rows": [], "tables": 0}
    for line in (text or "").splitlines():
        stripped = line.strip()
        if stripped.startswith("# OSU"):
            out["title"] = stripped[1:].strip()
        elif stripped.startswith("# Send Buffer"):
            out["buffers"] = "".join(re.findall(r"\((D|H|M)\)", stripped)) or None
        elif re.match(r"#\s*Size\s", stripped):
            out["tables"] += 1
            match = re.match(r"#\s*Size\s+(.*?)\s*\(?([A-Za-z/]+)\)\s*(.*)$", stripped)
            if match:
                out["column"], out["unit"] = match.group(1).strip(), match.group(2)
            else:
                out["column"] = stripped[1:].split(None, 1)[-1]
        elif out["column"] is not None:
            fields = stripped.split()
            if len(fields) >= 2 and fields[0].isdigit() and _NUMBER.match(fields[1]):
                out["rows"].append((int(fields[0]), float(fields[1])))
    return out


def osu_result(test, stdout, lat_size=8):
    """{gbps, lat_us, msg_size, source} of an OSU run; None without a table.

    Bandwidth: the best message size (OSU's MB/s are 10^6 bytes). Latency: at ``lat_size``
    bytes, else the smallest size printed above zero.
    """
    table = parse_osu(stdout)
    if not table["rows"]:
        return None
    column = "%s column %r" % (test, table["column"])
    if table["tables"] > 1:
        raise BenchError("%s printed %d result tables: which one is this run's is ambiguous" % (test, table["tables"]))
    sizes = [size for size, dummy in table["rows"]]
    twice = sorted({size for size in sizes if sizes.count(size) > 1})
    if twice:
        raise BenchError("%s printed %d bytes twice: which figure is this run's is ambiguous" % (test, twice[0]))
    if test == "osu_bw":
        for size, value in table["rows"]:  # the best is picked: every figure must be one
            figure(value, "%s at %d bytes" % (column, size))
        size, value = max(table["rows"], key=lambda r: r[1])
        unit = (table["unit"] or "MB/s").lower()
        factor = {"mb/s": 8e6 / 1e9, "gb/s": 1.0}.get(unit)
        if factor is None:
            raise BenchError("%s: unknown bandwidth unit %r" % (test, table["unit"]))
        return {"gbps": round(value * factor, 3), "lat_us": None, "msg_size": size, "source": "osu"}
    by_size = dict(table["rows"])
    size = lat_size if lat_size in by_size else min([s for s in by_size if s > 0] or list(by_size))
    return {"gbps": None, "lat_us": figure(by_size[size], "%s at %d bytes" % (column, size)),
            "msg_size": size, "source": "osu"}


def parse_help(text):
    """What an installed perftest binary supports, from its --help text."""
    text = text or ""
    return {"out_json": "--out_json" in text,
            "use_cuda": "--use_cuda=" in text,
            "use_cuda_bus_id": "--use_cuda_bus_id" in text,
            "report_gbits": "--report_gbits" in text}


def osu_help_cuda(text):
    """OMB prints its accelerator options (``-d cuda``) only when it was built with CUDA."""
    return bool(re.search(r"\bcuda\b", text or "", re.IGNORECASE))


# --------------------------------------------------------------------------------------------
# Settings and thresholds
# --------------------------------------------------------------------------------------------
def settings_from(params):
    """Merged settings, validated; raises BenchError naming the key."""
    merged = dict(DEFAULTS)
    merged.update({k: v for k, v in (params or {}).items() if k in DEFAULTS and v is not None})
    if isinstance(merged["tests"], str) or not isinstance(merged["tests"], list):
        raise BenchError("tests must be a list of %s, got %r" % (", ".join(TESTS), merged["tests"]))
    for test in merged["tests"]:
        if test not in TESTS:
            raise BenchError("tests: %r is not one of %s" % (test, ", ".join(TESTS)))
    if isinstance(merged["memory"], str) or not isinstance(merged["memory"], list):
        raise BenchError("memory must be a list of host, cuda, got %r" % (merged["memory"],))
    for memory in merged["memory"]:
        if memory not in MEMORIES:
            raise BenchError("memory: %r is not one of host, cuda" % (memory,))
    bw_fraction(merged["bw_fraction"], 0)  # a malformed table says so before anything runs
    for key in ("min_gbps", "lat_us_max"):
        try:
            merged[key] = float(merged[key] or 0)
        except (TypeError, ValueError):
            raise BenchError("%s must be a number, got %r" % (key, merged[key]))
        if merged[key] < 0:
            raise BenchError("%s must be >= 0, got %r" % (key, merged[key]))
    for key in ("msg_size", "duration", "lat_iters", "timeout", "start_timeout", "port_base", "osu_lat_size"):
        try:
            merged[key] = int(merged[key])
        except (TypeError, ValueError):
            raise BenchError("%s must be a whole number, got %r" % (key, merged[key]))
        if merged[key] <= 0 and key != "osu_lat_size":
            raise BenchError("%s must be > 0, got %r" % (key, merged[key]))
    if not PORTS[0] <= merged["port_base"] <= PORTS[1]:
        raise BenchError("port_base must be an unprivileged TCP port from %d to %d (one port per run follows it, "
                         "below 65535), got %d" % (PORTS + (merged["port_base"],)))
    if merged["affinity_gain"]:
        try:
            evaluate("affinity_gain", merged["affinity_gain"], 1.0)
        except ThresholdError as exc:
            raise BenchError(str(exc))
    for key in ("extra_args", "osu_mpirun_args", "osu_nic_args"):
        if isinstance(merged[key], str) or not isinstance(merged[key], list):
            raise BenchError("%s must be a list of arguments, got %r" % (key, merged[key]))
        merged[key] = [str(a) for a in merged[key]]
    for arg in merged["osu_nic_args"]:
        try:
            arg.format(nic="mlx5_0", port=1)
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            raise BenchError("osu_nic_args: %r: only {nic} and {port} can be filled in (%s: %s)"
                             % (arg, type(exc).__name__, exc))
    return merged


def validate_vars(values, host=None, hosts=()):
    """The gds_rdma_bench role's variables (gds_rdma_bench_*), each by the rule the module applies
    to its option (settings_from), plus the role's own: [message naming the variable and the value]."""
    out = []
    lists = [key for key in ("tests", "memory", "extra_args", "osu_mpirun_args", "osu_nic_args", "affinity_gain")
             if isinstance(values.get("gds_rdma_bench_" + key), str)]
    if lists:
        out.append("%s must be YAML lists, not strings (for example gds_rdma_bench_tests: [ib_write_bw, ib_read_bw])"
                   % ", ".join("gds_rdma_bench_" + key for key in lists))
    fraction = values.get("gds_rdma_bench_bw_fraction", DEFAULTS["bw_fraction"])
    try:
        bw_fraction(fraction, 0)
    except BenchError as exc:
        out.append("gds_rdma_bench_bw_fraction must be a fraction in (0, 1] or a mapping of port rates in Gb/s (and "
                   "'default') to such fractions, e.g. {default: 0.90, 400: 0.92}; got %s (%s)" % (fraction, exc))
    options = [(key, "gds_rdma_bench_" + key) for key in sorted(DEFAULTS) if key not in lists + ["bw_fraction"]]
    for key, name in options + [("port_base", "gds_rdma_bench_peer_port_base")]:
        if values.get(name) is not None:
            try:
                settings_from({key: values[name]})
            except BenchError as exc:
                out.append("%s (%s): %s" % (name, values[name], exc))
    poll = values.get("gds_rdma_bench_poll_interval")
    if poll is not None and not (given_int(poll) is not None and given_int(poll) >= 0):
        out.append("gds_rdma_bench_poll_interval (%s) must be a whole number of seconds >= 0" % (poll,))
    for name in ("gds_rdma_bench_perftest_dir", "gds_rdma_bench_osu_dir"):
        where = values.get(name, "")
        if where != "" and (not isinstance(where, str) or not where.startswith("/") or re.search(r"(^|/)\.\.(/|$)", where)):
            out.append("%s must be an absolute directory without '..' (or empty for PATH), got %s" % (name, where))
    peer, address = values.get("gds_rdma_bench_peer", ""), values.get("gds_rdma_bench_peer_address", "")
    if peer and (peer not in (hosts or ()) or peer == host) or not re.match(r"^[A-Za-z0-9.:_-]*$", str(address)):
        out.append("gds_rdma_bench_peer (%s) must be another host of the inventory (or empty for loopback), and "
                   "gds_rdma_bench_peer_address (%s) a host name or address" % (peer, address))
    return out


def bw_fraction(table, rate_gbps):
    """The fraction of the port rate a bandwidth test must reach: a number, or a table keyed by
    the port rate in Gb/s with an optional ``default``."""
    if isinstance(table, bool):
        raise BenchError("bw_fraction must be a number or {rate_gbps: fraction}, got %r" % (table,))
    if isinstance(table, (int, float)):
        entries = {"default": table}
    elif isinstance(table, dict):
        entries = table
    else:
        raise BenchError("bw_fraction must be a number or {rate_gbps: fraction}, got %r" % (table,))
    parsed = {}
    for key, value in entries.items():
        if not _RATE_KEY.match(str(key)) or isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BenchError("bw_fraction: %r: %r is not rate_gbps: fraction" % (key, value))
        fraction = float(value)
        rate = "default" if str(key) == "default" else float(key)
        if not 0 < fraction <= 1:
            raise BenchError("bw_fraction: %r: the fraction must be in (0, 1], got %r" % (key, value))
        parsed[rate] = fraction
    if rate_gbps is not None and float(rate_gbps) in parsed:
        return parsed[float(rate_gbps)]
    return parsed.get("default")


def threshold_gbps(nic, port, settings):
    """The floor in Gb/s of a bandwidth row: the profile's fraction of the port rate, at least
    ``min_gbps``. A software device (rxe, siw) reports its netdev's nominal speed, not a rate its
    loopback could reach: only the absolute floor applies there. None: nothing to judge against."""
    floors = [settings["min_gbps"]] if settings["min_gbps"] > 0 else []
    rate = port.get("rate_gbps")
    if not nic.get("software") and isinstance(rate, (int, float)) and rate > 0:
        fraction = bw_fraction(settings["bw_fraction"], rate)
        if fraction:
            floors.append(round(fraction * rate, 3))
    return max(floors) if floors else None


def judge(row, settings):
    """Set the verdict and reason of a measured row (gbps or lat_us set)."""
    if row["gbps"] is not None:
        floor = row["threshold_gbps"]
        if not row["affine"] and row["memory"] == "cuda":
            row.update(verdict="PASS", reason="non-affine reference (judged by the affinity gain)")
        elif floor is None:  # measured, but nothing to judge it against: no PASS
            row.update(verdict="WARN", reason="no threshold: port rate unknown and no min_gbps")
        elif row["gbps"] < floor:
            row.update(verdict="FAIL", reason="%.2f Gb/s is below %.2f Gb/s" % (row["gbps"], floor))
        elif row["gbps"] < floor * (1 + WARN_MARGIN):
            row.update(verdict="WARN", reason="within %d%% of %.2f Gb/s" % (WARN_MARGIN * 100, floor))
        else:
            row.update(verdict="PASS", reason="")
    else:
        limit = row.get("lat_us_max") or 0
        if not limit or (not row["affine"] and row["memory"] == "cuda"):
            row.update(verdict="PASS", reason="latency reported, not judged")
        elif row["lat_us"] > limit:
            row.update(verdict="FAIL", reason="%.2f us is above %.2f us" % (row["lat_us"], limit))
        elif row["lat_us"] > limit * (1 - WARN_MARGIN):
            row.update(verdict="WARN", reason="within %d%% of %.2f us" % (WARN_MARGIN * 100, limit))
        else:
            row.update(verdict="PASS", reason="")
    return row


# --------------------------------------------------------------------------------------------
# Plan
# --------------------------------------------------------------------------------------------
def _gpu_key(gpu):
    return "GPU%d" % int(gpu["index"])


def gpu_links(topology, nic_name):
    """[(class, gpu)] of every GPU to this NIC, nearest first (matrix, then gpus[].nics order)."""
    matrix = topology.get("matrix") or {}
    out = []
    for gpu in topology.get("gpus") or []:
        cls = (matrix.get(_gpu_key(gpu)) or {}).get(nic_name)
        if cls not in LINK_CLASSES:
            nics = gpu.get("nics") or []
            cls = (gpu.get("nic_link") if nics and nics[0] == nic_name else None) or "SYS"
        out.append((cls, gpu))
    return sorted(out, key=lambda item: (class_rank(item[0]), int(item[1]["index"])))


def _row(nic, port, test, memory, gpu=None, affine=True, link=None, settings=None):
    lat_max = settings["lat_us_max"] if test in ("ib_write_lat", "osu_latency") else None
    return {"nic": nic.get("name") if nic else None, "port": port.get("port") if port else None,
            "test": test, "memory": memory, "gpu": None if gpu is None else int(gpu["index"]),
            "gpu_bdf": None if gpu is None else gpu.get("bdf"), "affine": affine, "link": link,
            "rate_gbps": port.get("rate_gbps") if port else None,
            "numa_node": nic.get("numa_node") if nic else None,
            "gbps": None, "lat_us": None,
            # a far GPU's row is the penalty's reference, judged by the affinity gain
            "threshold_gbps": (threshold_gbps(nic, port, settings)
                               if nic and port and test in BW_TESTS and affine else None),
            "lat_us_max": lat_max or None,
            "verdict": None, "reason": None, "cmd": [], "server_cmd": [], "source": None}


def plan(topology, settings):
    """Every (NIC port, test, memory, GPU) row to measure, in run order, each with a ``key``
    that pairs it with the same row planned on a peer host (the NIC's position, not its name)."""
    nics = sorted(topology.get("nics") or [], key=lambda n: natural_key(n.get("name") or ""))
    rows = []
    if not nics:
        for test in settings["tests"]:
            for memory in settings["memory"]:
                if test in OSU_TESTS and memory == "host":
                    continue
                row = _row(None, None, test, memory, settings=settings)
                row.update(verdict="SKIP", reason="no RDMA device")
                rows.append(row)
        return rows
    for position, nic in enumerate(nics):
        links = gpu_links(topology, nic["name"])
        near = links[0] if links else None
        far = links[-1] if len(links) > 1 and class_rank(links[-1][0]) > class_rank(links[0][0]) else None
        if not nic.get("ports"):  # facts without ports: say so rather than plan nothing
            for test in settings["tests"]:
                row = _row(nic, None, test, "host" if test not in OSU_TESTS else "cuda", settings=settings)
                row.update(verdict="SKIP", reason="no port of %s in the facts" % nic["name"],
                           key="%d:-:%s" % (position, test))
                rows.append(row)
        for port in sorted(nic.get("ports") or [], key=lambda p: int(p.get("port") or 0)):
            down = None
            if str(port.get("state") or "").upper().rsplit(":", maxsplit=1)[-1].strip() not in ("ACTIVE", "4"):
                down = "port %s of %s is %s (%s): not measured" % (
                    port.get("port"), nic["name"], port.get("state") or "in an unknown state",
                    port.get("phys_state") or "physical state unknown")
            for test in settings["tests"]:
                variants = []
                if "host" in settings["memory"] and test not in OSU_TESTS:
                    variants.append(("host", None, True, None))
                if "cuda" in settings["memory"]:
                    variants.append(("cuda", near, True, near and near[0]))
                    if far and settings["far_gpu"] and test in BW_TESTS:
                        variants.append(("cuda", far, False, far[0]))
                for memory, link, affine, cls in variants:
                    row = _row(nic, port, test, memory, link[1] if link else None, affine, cls, settings)
                    row["key"] = "%d:%s:%s:%s:%s" % (position, port.get("port"), test, memory,
                                                     "near" if affine else "far")
                    if down:
                        row.update(verdict="FAIL", reason=down)
                    elif memory == "cuda" and link is None:
                        row.update(verdict="SKIP", reason="no NVIDIA GPU")
                    rows.append(row)
    for index, row in enumerate(rows):
        row["tcp_port"] = settings["port_base"] + index
    return rows


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------
def _pin(row, settings, numactl_path):
    node = row.get("numa_node")
    if numactl_path and isinstance(node, int) and node >= 0:
        return [numactl_path, "--cpunodebind=%d" % node, "--membind=%d" % node]
    return []


def perftest_command(binary, row, settings, features, side, address=None, json_file=None,
                     numactl_path=None, device=None):
    """argv of one perftest side (``server`` or ``client``) for a planned row."""
    cmd = _pin(row, settings, numactl_path) + [binary, "-d", device or row["nic"], "-i", str(row["port"]),
                                               "-p", str(row["tcp_port"]), "-F"]
    if row["test"].endswith("_lat"):
        cmd += ["-s", "2", "-n", str(settings["lat_iters"])]
    else:
        cmd += ["-s", str(settings["msg_size"]), "-D", str(settings["duration"])]
        if features.get("report_gbits", True):
            cmd.append("--report_gbits")
    if row["memory"] == "cuda":
        if features.get("use_cuda_bus_id") and row.get("gpu_bdf"):
            cmd.append("--use_cuda_bus_id=%s" % row["gpu_bdf"])
        else:
            cmd.append("--use_cuda=%d" % row["gpu"])
    if json_file and features.get("out_json"):
        cmd += ["--out_json", "--out_json_file=%s" % json_file]
    cmd += settings["extra_args"]
    if side == "client":
        cmd.append(address or settings["address"])
    return cmd


def osu_command(binary, row, settings, hosts, numactl_path=None):
    """mpirun argv of one OSU run with device buffers on both ranks (``D D``)."""
    nic_args = [a.format(nic=row["nic"], port=row["port"]) for a in settings["osu_nic_args"]]
    cmd = [settings["mpirun"], "-np", "2", "--host", hosts] + settings["osu_mpirun_args"] + nic_args
    return cmd + _pin(row, settings, numactl_path) + [binary, "-d", "cuda", "D", "D"]


# --------------------------------------------------------------------------------------------
# Processes (core/proc.py: each in its own process group, killed as a whole)
# --------------------------------------------------------------------------------------------
def run_process(cmd, timeout, env=None):
    """(rc, stdout, stderr, failure): ``failure`` says why it did not exit cleanly."""
    res = proc_run(cmd, timeout, env)
    if res.error:
        return None, "", "", res.error
    if res.timed_out:
        return None, res.stdout, res.stderr, "timed out after %d s and was killed" % timeout
    if res.rc < 0:
        return res.rc, res.stdout, res.stderr, "killed by signal %d" % -res.rc
    if res.rc:
        return res.rc, res.stdout, res.stderr, "exited %d" % res.rc
    return 0, res.stdout, res.stderr, None


def listening(port, proc_root="/proc"):
    """Whether a TCP socket listens on ``port`` (state 0A in /proc/net/tcp{,6}); None when the
    tables cannot be read."""
    seen = False
    for name in ("tcp", "tcp6"):
        data = read_bytes(os.path.join(proc_root, "net", name), 64 << 20)
        if data is None:
            continue
        lines = data.decode("ascii", "replace").splitlines()[1:]
        seen = True
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == "0A" and fields[1].rsplit(":", 1)[-1] == "%04X" % port:
                return True
    return False if seen else None


def wait_listening(proc, port, timeout, proc_root="/proc"):
    """Wait until the server listens; (ok, why). A server that exits first failed to start."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False, "the server exited %s before listening" % proc.returncode
        state = listening(port, proc_root)
        if state is None:
            time.sleep(min(2.0, timeout))  # no /proc/net: give it a moment
            return proc.poll() is None, "the server exited before the client started"
        if state:
            return True, None
        time.sleep(0.1)
    return False, "the server did not listen on TCP port %d within %d s" % (port, timeout)


def _tail(text):
    return (text or "").strip()[-STDERR_TAIL:]


def _env_for(row, features):
    env = dict(os.environ)
    if row["memory"] == "cuda" and not (features.get("use_cuda_bus_id") and row.get("gpu_bdf")):
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # --use_cuda=<index> in nvidia-smi's numbering
    return env


def run_perftest(row, binary, settings, features, numactl_path, mode="loopback", address=None):
    """Run one planned perftest row (the server too in loopback mode); fills gbps/lat_us, or sets
    an ERROR verdict with why. The server is killed whatever happens."""
    workdir = tempfile.mkdtemp(prefix="gds-perftest-")
    client_json = os.path.join(workdir, "client.json")
    env = _env_for(row, features)
    server = None
    try:
        if mode == "loopback":
            row["server_cmd"] = perftest_command(binary, row, settings, features, "server",
                                                 json_file=os.path.join(workdir, "server.json"),
                                                 numactl_path=numactl_path)
            try:
                server = proc_start(row["server_cmd"], env)
            except OSError as exc:
                return _error(row, "could not start the server: %s" % exc)
            ok, why = wait_listening(server, row["tcp_port"], settings["start_timeout"], settings["procfs_root"])
            if not ok:
                dummy, err = proc_kill(server)
                return _error(row, why, err)
        row["cmd"] = perftest_command(binary, row, settings, features, "client",
                                      address=address or settings["address"], json_file=client_json,
                                      numactl_path=numactl_path)
        deadline = time.time() + settings["start_timeout"]
        while True:
            rc, out, err, failure = run_process(row["cmd"], settings["timeout"], env)
            # two-node mode: the peer's server may not listen yet
            if (mode == "client" and failure and rc is not None and time.time() < deadline
                    and re.search(r"connect", out + err, re.IGNORECASE)):
                time.sleep(1)
                continue
            break
        json_text = None
        if os.path.exists(client_json):
            try:
                json_text = read_bounded(client_json, follow=False).decode("utf-8", "replace")
            except UnreadableFile as exc:
                return _error(row, str(exc))
        try:
            result = None if failure else perftest_result(row["test"], out, json_text,
                                                          gbits=features.get("report_gbits", True))
        except BenchError as exc:  # this row's output is unreadable; the others are still judged
            return _error(row, "unreadable result: %s" % exc)
        if result is None:
            return _error(row, failure or "printed no result table", err or out)
        row.update(gbps=result["gbps"], lat_us=result["lat_us"], source=result["source"])
        return judge(row, settings)
    finally:
        if server is not None:
            try:
                server.wait(timeout=5)  # a loopback server ends with its client
            except subprocess.TimeoutExpired:
                pass
            proc_kill(server)
        shutil.rmtree(workdir, ignore_errors=True)


def run_osu(row, binary, settings, hosts, numactl_path):
    """One OSU run through mpirun; fills gbps/lat_us or an ERROR."""
    row["cmd"] = osu_command(binary, row, settings, hosts, numactl_path)
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=str(row["gpu"]))
    rc, out, err, failure = run_process(row["cmd"], settings["timeout"], env)
    try:
        result = None if failure else osu_result(row["test"], out, settings["osu_lat_size"])
    except BenchError as exc:
        return _error(row, "unreadable result: %s" % exc)
    if result is None:
        return _error(row, failure or "printed no result table", err or out)
    row.update(gbps=result["gbps"], lat_us=result["lat_us"], source=result["source"])
    return judge(row, settings)


def _error(row, why, output=""):
    tail = _tail(output)
    row.update(verdict="ERROR", reason="; ".join(p for p in (why, tail) if p))
    return row


def _which(name, directory=""):
    """The executable in ``directory`` (a CUDA build), else on PATH; None when neither has it."""
    if directory:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return shutil.which(name)


def probe(settings):
    """What the node has: perftest binaries and their features, numactl, OMB with CUDA, mpirun."""
    found = {"perftest": {}, "features": {}, "numactl": None, "osu": {}, "osu_cuda": False, "mpirun": None}
    for test in PERFTEST_TESTS:
        path = _which(test, settings["perftest_dir"])
        if path:
            found["perftest"][test] = path
            dummy, out, err, dummy = run_process([path, "--help"], 15)
            found["features"][test] = parse_help(out + err)
    found["numactl"] = _which(settings["numactl"]) if settings["numactl"] else None
    found["mpirun"] = _which(settings["mpirun"]) if settings["mpirun"] else None
    for test in OSU_TESTS:
        path = _which(test, settings["osu_dir"])
        if path:
            found["osu"][test] = path
    if found["osu"].get("osu_bw") and found["mpirun"]:
        dummy, out, err, dummy = run_process([found["osu"]["osu_bw"], "--help"], 30)
        found["osu_cuda"] = osu_help_cuda(out + err)
    return found


def skip_reason(row, found):
    """Why a planned row cannot run on this node, or None."""
    if row["test"] in OSU_TESTS:
        if not found["osu"].get(row["test"]):
            return "OSU micro-benchmarks not installed (%s not found)" % row["test"]
        if not found["mpirun"]:
            return "no MPI (mpirun not found)"
        if not found["osu_cuda"]:
            return "OSU micro-benchmarks built without CUDA"
        return None
    if not found["perftest"].get(row["test"]):
        return "perftest not installed (%s not found)" % row["test"]
    features = found["features"].get(row["test"]) or {}
    if row["memory"] == "cuda" and not (features.get("use_cuda") or features.get("use_cuda_bus_id")):
        return "perftest built without CUDA"
    return None


def run_all(topology, settings, mode="loopback", runs=None, skip=None, check_mode=False, found=None):
    """Plan (or take the given plan), probe, run every row; returns (rows, found)."""
    rows = [dict(r) for r in runs] if runs is not None else plan(topology, settings)
    found = found if found is not None else (probe(settings) if not (skip or check_mode) else None)
    peer = settings["peer_address"]
    for row in rows:
        if row["verdict"] is not None:
            continue
        reason = skip or ("check mode: nothing was run" if check_mode else None) or skip_reason(row, found)
        if reason:
            row.update(verdict="SKIP", reason=reason)
            continue
        if row["test"] in OSU_TESTS:
            hosts = "%s,%s" % ("localhost", peer) if mode == "client" and peer else "localhost:2"
            run_osu(row, found["osu"][row["test"]], settings, hosts, found["numactl"])
        else:
            run_perftest(row, found["perftest"][row["test"]], settings, found["features"][row["test"]],
                         found["numactl"], mode=mode, address=peer if mode == "client" else None)
    return rows, found


def pair_with_peer(client_rows, topology, settings):
    """The server side of the two-node mode: this host's own rows matching the client's plan by
    key (the NIC's position, port, test, memory, near/far), on the client's TCP ports."""
    mine = {r.get("key"): r for r in plan(topology, settings)}
    out = []
    for client in client_rows:
        if client["test"] in OSU_TESTS or client.get("verdict") is not None:
            continue  # mpirun starts both ranks itself; a skipped client row needs no server
        row = mine.get(client.get("key"))
        if row is None or row.get("verdict") is not None:
            continue
        row = dict(row, tcp_port=client["tcp_port"])
        out.append(row)
    return out


def run_servers(rows, settings, found):
    """Start every server at once (each on its own TCP port), wait until each has served its
    client or the overall deadline passed, then kill what is left. Returns rows with verdicts."""
    procs = []
    try:
        for row in rows:
            reason = skip_reason(row, found)
            if reason:
                row.update(verdict="SKIP", reason=reason)
                continue
            features = found["features"][row["test"]]
            row["server_cmd"] = perftest_command(found["perftest"][row["test"]], row, settings, features,
                                                 "server", numactl_path=found["numactl"])
            try:
                procs.append((row, proc_start(row["server_cmd"], _env_for(row, features))))
            except OSError as exc:
                _error(row, "could not start the server: %s" % exc)
        deadline = time.time() + settings["start_timeout"] + len(procs) * (settings["timeout"] + 5)
        for row, proc in procs:
            try:
                proc.wait(timeout=max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                pass
            rc = proc.poll()
            out, err = proc_kill(proc)
            if rc == 0:
                row.update(verdict="PASS", reason="served its client")
            else:
                _error(row, "killed at the deadline" if rc is None else "exited %s" % rc, err or out)
    finally:
        for dummy, proc in procs:
            proc_kill(proc)
    return rows


# --------------------------------------------------------------------------------------------
# Checks for the report
# --------------------------------------------------------------------------------------------
def row_name(row):
    if row["nic"] is None:
        return "rdma: bench %s %s" % (row["test"], row["memory"])
    gpu = "" if row["gpu"] is None else " GPU%d%s" % (row["gpu"], "" if row["affine"] else " (far)")
    where = row["nic"] if row["port"] is None else "%s port %s" % (row["nic"], row["port"])
    return "rdma: bench %s %s %s%s" % (where, row["test"], row["memory"], gpu)


def row_check(row):
    """The check of one row. What its verdict was judged from: the bandwidth and, on a row with a
    floor of its own (judge: not the far GPU's reference row), the floor; or the latency."""
    if row.get("test") in BW_TESTS:
        floor = row.get("threshold_gbps")
        expected = ">= %s Gb/s" % _number_text(floor) if floor is not None else None
        actual = None if row.get("gbps") is None else "%s Gb/s" % _number_text(row["gbps"])
        inputs = {"gbps": row.get("gbps")}
        if row.get("affine", True) or row.get("memory") != "cuda":
            inputs["threshold_gbps"] = floor
    else:
        expected = "<= %s us" % _number_text(row["lat_us_max"]) if row.get("lat_us_max") else None
        actual = None if row.get("lat_us") is None else "%s us" % _number_text(row["lat_us"])
        inputs = {"lat_us": row.get("lat_us")}
    return check(row_name(row), row["verdict"], expected, actual, row.get("reason") or None, inputs=inputs,
                 nic=row.get("nic"), port=row.get("port"), gpu=row.get("gpu"), metric=row.get("test"))


def _number_text(value):
    return "%g" % value if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def affinity_checks(rows, spec):
    """The non-affine penalty: near-GPU / far-GPU bandwidth of the same NIC port and test."""
    if not spec:
        return []
    near = {(r["nic"], r["port"], r["test"]): r for r in rows
            if r["memory"] == "cuda" and r["affine"] and r.get("gbps") is not None}
    out = []
    for far in rows:
        if far["memory"] != "cuda" or far["affine"] or far["nic"] is None:
            continue
        mine = near.get((far["nic"], far["port"], far["test"]))
        name = "rdma: bench %s port %s %s affinity gain" % (far["nic"], far["port"], far["test"])
        if mine is None or far.get("gbps") is None:
            out.append(check(name, "SKIP", None, None, "not measured: %s" % (
                far.get("reason") if far.get("gbps") is None else "no near-GPU result")))
            continue
        ratio = None
        if known_figure(mine["gbps"]) is None or known_figure(far["gbps"]) is None:
            ratio = float("nan")  # a bandwidth that is no figure: evaluate's ERROR, naming it
        elif far["gbps"]:
            ratio = mine["gbps"] / far["gbps"]
        result = evaluate("affinity_gain", spec, ratio)
        detail = "GPU%s (%s) %s Gb/s / GPU%s (%s) %s Gb/s" % (
            mine["gpu"], mine["link"], _number_text(mine["gbps"]), far["gpu"], far["link"], _number_text(far["gbps"]))
        out.append(check(name, result["verdict"], result["expected"], result["actual"],
                         "; ".join(p for p in (result.get("detail"), detail) if p)))
    return out


def checks_for(rows, settings):
    """Every row's check and the affinity checks; the rows skipped for one reason (a simulated
    node, no perftest) as one check each (core/checks.fold_skips)."""
    return fold_skips([row_check(r) for r in rows] + affinity_checks(rows, settings["affinity_gain"]))


def public_rows(rows):
    """The rows as the host fact carries them (no planning internals)."""
    keep = ("nic", "port", "test", "memory", "gpu", "affine", "gbps", "lat_us", "threshold_gbps",
            "verdict", "reason", "link", "rate_gbps", "lat_us_max", "cmd", "server_cmd", "source")
    return [{k: r.get(k) for k in keep} for r in rows]


# The role gds_rdma_bench: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_rdma_bench', 'gds_rdma_bench_',
    short_description='Measure GPUDirect RDMA per NIC port and judge it against the port rate',
    description=("perftest ib_write_bw, ib_read_bw and ib_write_lat per NIC port as the node's own loopback (or "
                 "against gds_rdma_bench_peer), host and GPU memory, pinned to the NIC's NUMA node; OSU osu_bw / "
                 'osu_latency with device buffers where OMB with CUDA and MPI is installed.',
                 'Records gds_rdma_bench_checks and gds_rdma_bench_results for the report.',),
    variables=[
        Var('gds_rdma_bench_enabled', 'bool',
            'Measure GPUDirect RDMA at all (false: no row, no check).',
            True),
        Var('gds_rdma_bench_tests', 'list',
            'Tests per NIC port: perftest ib_write_bw, ib_read_bw, ib_write_lat; OSU osu_bw, osu_latency (D D).',
            DEFAULTS['tests'],
            choices=('ib_write_bw', 'ib_read_bw', 'ib_write_lat', 'osu_bw', 'osu_latency'),
            elements='str'),
        Var('gds_rdma_bench_memory', 'list',
            'Buffers measured: host memory and GPU memory (cuda) of the GPU nearest the NIC.',
            DEFAULTS['memory'],
            choices=('host', 'cuda'),
            elements='str'),
        Var('gds_rdma_bench_far_gpu', 'bool',
            'Also run the bandwidth tests from the GPU farthest from the NIC (the non-affine penalty).',
            DEFAULTS['far_gpu']),
        Var('gds_rdma_bench_perftest_dir', 'str',
            'Directory of a CUDA build of perftest (scripts/build-perftest-cuda.sh), looked in before PATH.',
            '/opt/perftest-cuda/bin'),
        Var('gds_rdma_bench_osu_dir', 'str',
            'Directory of osu_bw / osu_latency built with CUDA and MPI, looked in before PATH ("": PATH only).',
            DEFAULTS['osu_dir']),
        Var('gds_rdma_bench_mpirun', 'str',
            'MPI launcher of the OSU tests; empty skips them.',
            DEFAULTS['mpirun']),
        Var('gds_rdma_bench_osu_mpirun_args', 'list',
            'Extra mpirun arguments of the OSU tests (for example --allow-run-as-root).',
            DEFAULTS['osu_mpirun_args'],
            elements='str'),
        Var('gds_rdma_bench_osu_nic_args', 'list',
            'mpirun arguments that select the NIC port ({nic} and {port} are replaced).',
            DEFAULTS['osu_nic_args'],
            elements='str'),
        Var('gds_rdma_bench_osu_lat_size', 'int',
            'Message size (bytes) whose osu_latency figure is reported.',
            DEFAULTS['osu_lat_size']),
        Var('gds_rdma_bench_bw_fraction', 'raw',
            'Fraction of the port rate a bandwidth test must reach: a number or {rate_gbps: fraction, default: f}.',
            DEFAULTS['bw_fraction']),
        Var('gds_rdma_bench_min_gbps', 'float',
            'Absolute bandwidth floor in Gb/s (0: none); the only floor of a software device (rxe, siw).',
            0),
        Var('gds_rdma_bench_lat_us_max', 'float',
            'Latency ceiling in microseconds of ib_write_lat / osu_latency (0: reported, not judged).',
            0),
        Var('gds_rdma_bench_affinity_gain', 'list',
            'Near-GPU / far-GPU bandwidth as [reference, lower, upper, unit]; [] does not judge it.',
            DEFAULTS['affinity_gain'],
            elements='raw'),
        Var('gds_rdma_bench_msg_size', 'int',
            'Message size in bytes of the perftest bandwidth tests.',
            DEFAULTS['msg_size']),
        Var('gds_rdma_bench_duration', 'int',
            'Seconds each perftest bandwidth test runs.',
            DEFAULTS['duration']),
        Var('gds_rdma_bench_lat_iters', 'int',
            'Iterations of ib_write_lat.',
            DEFAULTS['lat_iters']),
        Var('gds_rdma_bench_timeout', 'int',
            'Seconds any one benchmark process may run before it is killed.',
            DEFAULTS['timeout']),
        Var('gds_rdma_bench_start_timeout', 'int',
            'Seconds a server has to listen (and a two-node client retries its connection).',
            DEFAULTS['start_timeout']),
        Var('gds_rdma_bench_port_base', 'int',
            'First TCP port of the loopback runs (one port per run).',
            DEFAULTS['port_base']),
        Var('gds_rdma_bench_address', 'str',
            'Address the loopback clients connect to.',
            DEFAULTS['address']),
        Var('gds_rdma_bench_extra_args', 'list',
            'Extra perftest arguments on both sides (for example ["-x", "3"], a RoCE GID index).',
            DEFAULTS['extra_args'],
            elements='str'),
        Var('gds_rdma_bench_numactl', 'str',
            "numactl on the node, to pin each run to its NIC's NUMA node; empty runs unpinned.",
            DEFAULTS['numactl']),
        Var('gds_rdma_bench_peer', 'str',
            'Two-node mode: the inventory host that runs the servers (this host runs the clients); "" loopback.',
            ''),
        Var('gds_rdma_bench_peer_address', 'str',
            'The peer\'s address for the clients; "": its ansible_host, else its inventory name.',
            DEFAULTS['peer_address']),
        Var('gds_rdma_bench_peer_port_base', 'int',
            "First TCP port of the two-node runs (apart from the peer's own loopback ports).",
            19515),
        Var('gds_rdma_bench_poll_interval', 'int',
            'Seconds between progress polls of the measurement (0: run in the foreground).',
            10),
    ],
    shared=('gds_live',),
    entry_points={
        'validate': "main",
    },
)
