#!/usr/bin/env python3
"""Records and the side-by-side table of bench/side_by_side.sh (no GPU needed for the table).

  side_by_side.py record RUNS ROUND WORKLOAD TOOL KIND RESULT RC CMD...
      append one run to RUNS (JSON lines). KIND: gdsbench (RESULT = its --json file), fio (fio's
      --output-format=json file), kvikio (the text KvikIO's single_node_io printed; one record
      per read/write line, WORKLOAD names the read workload, the write one is derived), probe
      (cufile_probe's JSON line). A run without a usable result is recorded with value null.
  side_by_side.py table RUNS OUTDIR
      write OUTDIR/side_by_side.md and OUTDIR/side_by_side.json: per workload and tool the value
      of every round, the median, and the ratio to the best peer of the same round (peers: fio
      and KvikIO), with the ratios' min/median/max; and the threads-vs-processes probe table.

Workloads: seqread and seqwrite are compared in GiB/s, randread and randwrite in IOPS.
"""
import json
import re
import statistics
import sys

PEER_PREFIXES = ("fio", "kvikio")
METRIC = {"seqread": "gib_s", "seqwrite": "gib_s", "randread": "iops", "randwrite": "iops"}
WORKLOAD_TITLE = {
    "seqread": "1 MiB sequential reads",
    "seqwrite": "1 MiB sequential writes",
    "randread": "4 KiB random reads",
    "randwrite": "4 KiB random writes",
}


class RecordError(Exception):
    pass


def _load_json(path):
    with open(path) as f:
        text = f.read()
    if "{" not in text:
        raise RecordError("%s holds no JSON object" % path)
    return json.loads(text[text.index("{"):])


def parse_gdsbench(path):
    j = _load_json(path)
    return {"gib_s": j["throughput_gib_s"], "iops": j["iops"], "lat_us": j["lat_us"]["mean"],
            "p99_us": j["lat_us"].get("p99"), "path": j.get("path", {}).get("mode"), "procs": j.get("procs", 1),
            "errors": j.get("errors", 0) + j.get("verify_errors", 0)}


def parse_fio(path):
    job = _load_json(path)["jobs"][0]
    side = job["read"] if job["read"]["io_bytes"] else job["write"]
    pct = side.get("clat_ns", {}).get("percentile", {})
    return {"gib_s": side["bw_bytes"] / 2 ** 30, "iops": side["iops"], "lat_us": side["lat_ns"]["mean"] / 1000,
            "p99_us": pct.get("99.000000", 0) / 1000 or None, "errors": job.get("error", 0)}


_KVIKIO_LINE = re.compile(r"^\s*(\S+)\s+(read|write)\s*\|\s*([\d.]+)\s*([KMGT]iB)/s")
_UNITS = {"KiB": 2 ** -20, "MiB": 2 ** -10, "GiB": 1.0, "TiB": 1024.0}


def parse_kvikio(path):
    """{'read': GiB/s, 'write': GiB/s} from the lines of KvikIO's single_node_io."""
    out = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = _KVIKIO_LINE.match(line)
            if m:
                out[m.group(2)] = float(m.group(3)) * _UNITS[m.group(4)]
    if not out:
        raise RecordError("%s: no 'read |' or 'write |' result line of KvikIO" % path)
    return out


def record(argv):
    if len(argv) < 7:
        raise SystemExit("usage: side_by_side.py record RUNS ROUND WORKLOAD TOOL KIND RESULT RC CMD...")
    runs, rnd, workload, tool, kind, result, rc = argv[:7]
    base = {"round": int(rnd), "workload": workload, "tool": tool, "kind": kind, "rc": int(rc),
            "cmd": " ".join(argv[7:])}
    recs = []
    try:
        if kind == "gdsbench":
            recs.append(dict(base, **parse_gdsbench(result)))
        elif kind == "fio":
            recs.append(dict(base, **parse_fio(result)))
        elif kind == "kvikio":
            got = parse_kvikio(result)
            for op, gib in sorted(got.items()):
                wl = workload if op == "read" else workload.replace("read", "write")
                recs.append(dict(base, workload=wl, gib_s=gib))
        elif kind == "probe":
            j = _load_json(result)
            recs.append(dict(base, **{k: j.get(k) for k in ("gib_s", "iops", "lat_us", "per_worker_gib_s", "mode",
                                                            "engine", "workers", "params")}))
        else:
            raise RecordError("unknown kind %s" % kind)
    except (OSError, ValueError, KeyError, IndexError, TypeError, RecordError) as e:
        recs = [dict(base, gib_s=None, iops=None, note="no result: %s" % e)]
    with open(runs, "a") as f:
        for r in recs:
            if r["rc"] != 0 and not r.get("note"):
                r["note"] = "exit status %d" % r["rc"]
            f.write(json.dumps(r) + "\n")
    return 0


def _spread(values):
    v = [x for x in values if x is not None]
    if not v:
        return None
    return {"min": min(v), "median": statistics.median(v), "max": max(v), "n": len(v)}


def is_peer(tool):
    return tool.startswith(PEER_PREFIXES)


def build(runs):
    """The side-by-side data: {workload: {"metric", "rounds", "tools": {tool: {...}}}} and the probe's."""
    table, probe = {}, {}
    for r in runs:
        if r.get("kind") == "probe":
            probe.setdefault(r["workload"], {}).setdefault(r["tool"], {})[r["round"]] = r.get("gib_s") \
                if METRIC.get(r["workload"], "gib_s") == "gib_s" else r.get("iops")
            continue
        wl = r["workload"]
        metric = METRIC.get(wl, "gib_s")
        t = table.setdefault(wl, {"metric": metric, "tools": {}})
        entry = t["tools"].setdefault(r["tool"], {"values": {}, "peer": is_peer(r["tool"]), "notes": []})
        value = r.get(metric)
        if value is not None and r.get("rc", 0) != 0:
            value = None
        entry["values"][r["round"]] = value
        if r.get("note"):
            entry["notes"].append("round %d: %s" % (r["round"], r["note"]))
        for k in ("path", "procs"):
            if r.get(k) is not None:
                entry[k] = r[k]
    for wl, t in table.items():
        rounds = sorted({rnd for e in t["tools"].values() for rnd in e["values"]})
        t["rounds"] = rounds
        best = {}
        for rnd in rounds:
            cands = [(e["values"].get(rnd), name) for name, e in t["tools"].items()
                     if e["peer"] and e["values"].get(rnd) is not None]
            best[rnd] = max(cands) if cands else (None, None)
        t["best_peer"] = {str(rnd): {"tool": b[1], "value": b[0]} for rnd, b in best.items()}
        for e in t["tools"].values():
            ratios = {}
            for rnd in rounds:
                v, b = e["values"].get(rnd), best[rnd][0]
                ratios[rnd] = v / b if v is not None and b else None
            e["ratio_to_best_peer"] = ratios
            e["value_spread"] = _spread(e["values"].values())
            e["ratio_spread"] = _spread(ratios.values())
    return table, probe


def _fmt(v, metric):
    if v is None:
        return "-"
    return "%.0f" % v if metric == "iops" else "%.3f" % v


def markdown(table, probe):
    out = ["# Side by side (bench/side_by_side.sh)", "",
           "Per round the ratio is the tool's figure over the best peer's (fio, KvikIO) in the same round;",
           "spread = min / median / max of those ratios. A `-` is a run without a result.",
           "gdsbench -x 0 without -P runs as gdsbench-procs for the 1 MiB sequential workloads and as",
           "gdsbench-threads for the 4 KiB random ones.", ""]
    for wl in [w for w in METRIC if w in table] + sorted(w for w in table if w not in METRIC):
        t = table[wl]
        metric, rounds = t["metric"], t["rounds"]
        unit = "GiB/s" if metric == "gib_s" else "IOPS"
        out += ["## %s (%s)" % (WORKLOAD_TITLE.get(wl, wl), unit), ""]
        out.append("| tool | " + " | ".join("r%d" % r for r in rounds) + " | median | ratio per round | "
                   "ratio min / median / max |")
        out.append("|---|" + "---|" * len(rounds) + "---|---|---|")
        order = sorted(t["tools"].items(), key=lambda kv: (kv[1]["peer"], kv[0]))
        for name, e in order:
            vs = e["value_spread"]
            rs = e["ratio_spread"]
            label = name + (" (peer)" if e["peer"] else "")
            out.append("| %s | %s | %s | %s | %s |" % (
                label, " | ".join(_fmt(e["values"].get(r), metric) for r in rounds),
                _fmt(vs["median"] if vs else None, metric),
                " ".join("-" if e["ratio_to_best_peer"][r] is None else "%.2f" % e["ratio_to_best_peer"][r]
                         for r in rounds),
                "-" if not rs else "%.2f / %.2f / %.2f" % (rs["min"], rs["median"], rs["max"])))
        bp = ", ".join("r%s %s" % (r, b["tool"] or "-") for r, b in t["best_peer"].items())
        out += ["", "Best peer per round: %s." % bp]
        notes = ["%s: %s" % (name, n) for name, e in order for n in e["notes"]]
        if notes:
            out += [""] + ["- " + n for n in notes]
        out.append("")
    if probe:
        out += ["## cufile_probe: N threads of one process against N processes", "",
                "GiB/s (IOPS for random workloads) of the same cuFileRead/cuFileWrite loop; "
                "the ratio is processes over threads of the same engine and round.", ""]
        for wl, tools in sorted(probe.items()):
            rounds = sorted({r for v in tools.values() for r in v})
            metric = METRIC.get(wl, "gib_s")
            out.append("| %s | " % wl + " | ".join("r%d" % r for r in rounds) + " | median |")
            out.append("|---|" + "---|" * (len(rounds) + 1))
            for name in sorted(tools):
                vals = tools[name]
                s = _spread(vals.values())
                out.append("| %s | %s | %s |" % (name, " | ".join(_fmt(vals.get(r), metric) for r in rounds),
                                                 _fmt(s["median"] if s else None, metric)))
            for name in sorted(tools):
                if not name.endswith("-procs"):
                    continue
                thr = tools.get(name[:-len("-procs")] + "-threads")
                if not thr:
                    continue
                rat = [tools[name][r] / thr[r] for r in rounds
                       if tools[name].get(r) is not None and thr.get(r)]
                if rat:
                    out.append("")
                    out.append("%s / threads: %s (median %.2f)" % (name, " ".join("%.2f" % x for x in rat),
                                                                   statistics.median(rat)))
            out.append("")
    return "\n".join(out) + "\n"


def table_cmd(argv):
    if len(argv) != 2:
        raise SystemExit("usage: side_by_side.py table RUNS OUTDIR")
    runs_path, outdir = argv
    runs = []
    with open(runs_path) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    runs.append(json.loads(line))
                except ValueError as e:
                    raise SystemExit("%s line %d: not JSON (%s)" % (runs_path, n, e))
    table, probe = build(runs)
    md = markdown(table, probe)
    with open(outdir + "/side_by_side.md", "w") as f:
        f.write(md)

    def keys_to_str(obj):
        if isinstance(obj, dict):
            return {str(k): keys_to_str(v) for k, v in obj.items()}
        return obj
    with open(outdir + "/side_by_side.json", "w") as f:
        json.dump({"workloads": keys_to_str(table), "probe": keys_to_str(probe)}, f, indent=1, sort_keys=True)
    sys.stdout.write(md)
    return 0


def main(argv):
    if list(argv[:1]) in (["-h"], ["--help"]):  # the usage, before anything is read or written
        print(__doc__)
        return 0
    if not argv or argv[0] not in ("record", "table"):
        raise SystemExit(__doc__)
    return record(argv[1:]) if argv[0] == "record" else table_cmd(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
