#!/usr/bin/env python3
"""What the watch of a benchmark job costs, and what it sees (bench/gpu_watch.sh runs this).

The same gdsbench job runs ROUNDS times bare and ROUNDS times watched, alternating which goes
first in each round. "Watched" is what gds_bench does around a job (plugins/module_utils/measure/watch.py):
NVML sampling of every GPU (measure/devhealth.py's NvmlSampler: link state and PCIe traffic), diskstats
before and after, gds_stats -p PID -l 3 beside a cuFile job. Prints GiB/s side by side with their
ratio, the median overhead, and per watched run the GPU's PCIe receive bytes against the bytes
the job read, the drive load, cuFile's placement and the path's limit. No ansible needed: the
collection's module_utils are imported from the repository's collections/ (collection_path.py).

  watch_overhead.py --gdsbench PATH --dir DATA [--gpu 0] [--xfer 0] [--rounds 4] [--seconds 5]
                    [--threads 8] [--size 1G] [--io-size 1M] [--interval 0.5] [--gds-stats PATH]
                    [--cufile-json PATH] [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# the collection's module_utils by their collection names (none of them needs ansible-core)
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from collection_path import use_collection  # beside this script
use_collection(__file__)
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import HealthRun
from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import NvmlUnavailable, nvml_gpus
from ansible_collections.gds.commission.plugins.module_utils.core.proc import run as proc_run
from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import CUFILE_XFER_TYPES, GPU_XFER_TYPES
from ansible_collections.gds.commission.plugins.module_utils.measure.watch import JobWatch, gds_stats_tool

GIB = float(1 << 30)
MIN_ROUNDS = 6  # fewer paired rounds give no meaningful interval of their median


def topology():
    """gds_topology's facts of this machine (the limit, the drives' PCI addresses), NVML's order."""
    try:
        bus_ids = [g["bdf"] for g in nvml_gpus()]
    except NvmlUnavailable:
        bus_ids = None
    try:
        return discover("/sys", "/proc", bus_ids)[0]
    except Exception as exc:  # a machine the model cannot read: the limit is then unknown
        print("topology not read: %s" % exc)
        return {}


def one_run(args, cmd, rec_path, watched, topo, stats):
    """(record or None, watch entry, checks) of one gdsbench run."""
    if os.path.exists(rec_path):
        os.remove(rec_path)
    job = {"name": "seq_read", "target": args.dir, "gpu": args.gpu, "xfer_type": args.xfer,
           "io_type": "read", "drives_from_target": True}
    health = watch = None
    cpu0, child0, wall0 = time.process_time(), _children_cpu(), time.monotonic()
    if watched:
        health = HealthRun([], "/sys", [], "", {}, [args.gpu] if args.xfer in CUFILE_XFER_TYPES else [],
                           interval=args.interval, traffic=True)
        health.begin()
        watch = JobWatch({}, "/proc", "/sys", topo, health, stats[0], stats[1])
        watch.begin(job)
    res = proc_run(cmd + ["--json", rec_path], args.seconds + 120, started=watch.started if watch else None)
    record = None
    try:
        with open(rec_path) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        print("run failed: rc=%s %s %s" % (res.rc, res.error or "", (res.stderr or "").strip()[-400:]))
    entry, checks = ({}, [])
    if watched:
        entry, checks = watch.end(job, record or {})
        health.end()
    if record is not None:
        # what this process (the watch's threads, or nothing but waiting) and gdsbench cost in CPU
        record["cpu"] = {"watch_s": round(time.process_time() - cpu0, 4), "wall_s": round(time.monotonic() - wall0, 3),
                         "gdsbench_s": round(_children_cpu() - child0, 3)}
    return record, entry, checks


def median_interval(values, level=0.95, draws=4000, seed=25):
    """A bootstrap interval of the median of ``values`` (deterministic: a fixed seed)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median([rng.choice(values) for dummy in values]) for dummy in range(draws))
    cut = int((1 - level) / 2 * draws)
    return medians[cut], medians[-cut - 1]


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report_watch(record, entry, checks, gpu):
    moved = record.get("bytes") or 0
    cpu = record.get("cpu") or {}
    if cpu:
        print("    CPU: the watch %.3f s over %.1f s (%.2f %% of one core); gdsbench %.2f s: watch/gdsbench %.2f %%" % (
            cpu["watch_s"], cpu["wall_s"], 100.0 * cpu["watch_s"] / cpu["wall_s"], cpu["gdsbench_s"],
            100.0 * cpu["watch_s"] / cpu["gdsbench_s"] if cpu["gdsbench_s"] else float("nan")))
    for g in entry.get("gpus") or []:
        if g.get("index") == gpu or g.get("rx_bytes", 0) >= 0.05 * max(moved, 1):
            if "unknown" in g:
                print("    GPU%s %s: PCIe traffic unknown: %s" % (g["index"], g.get("bdf"), g["unknown"]))
            else:
                print("    GPU%s %s: PCIe rx %d B, tx %d B; the job read %d B: rx/read %.3f (%s)" % (
                    g["index"], g.get("bdf"), g["rx_bytes"], g["tx_bytes"], moved,
                    g["rx_bytes"] / float(moved) if moved else float("nan"), g.get("source")))
    if entry.get("gpus_unknown"):
        print("    GPUs: unknown: %s" % entry["gpus_unknown"])
    for d in entry.get("drives") or []:
        print("    drive %s %s: read %s B (%.3f of the job's), %s r/s, r_await %s ms, util %s%%" % (
            d.get("name"), d.get("bdf"), d.get("read_bytes"), (d.get("read_bytes") or 0) / float(moved or 1),
            d.get("r_s"), d.get("r_await_ms"), d.get("util_pct")))
    if entry.get("drives_unknown"):
        print("    drives: unknown: %s" % entry["drives_unknown"])
    print("    cuFile (gds_stats): %s" % json.dumps(entry.get("cufile"))[:600])
    limit = entry.get("limit") or {}
    print("    path limit: %s" % (limit.get("unknown") or "%s GB/s (%s), fraction %s" % (
        limit.get("gb_s"), limit.get("bound"), entry.get("fraction"))))
    for c in checks:
        print("    %-5s %s: %s | %s" % (c["verdict"], c["name"], c.get("actual"), (c.get("detail") or "")[:300]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gdsbench", required=True)
    parser.add_argument("--dir", required=True, help="directory holding the files of an earlier write (gdsbench.N)")
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--xfer", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--size", default="1G")
    parser.add_argument("--io-size", default="1M")
    parser.add_argument("--interval", type=float, default=0.5, help="NVML sampling interval (gds_bench's nvml_interval)")
    parser.add_argument("--gds-stats", default="/usr/local/cuda/gds/tools/gds_stats")
    parser.add_argument("--cufile-json", default=os.environ.get("CUFILE_ENV_PATH_JSON") or "/etc/cufile.json")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "obj", "gpu_watch"))
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # as gds_bench: -d N is NVML's GPU N
    cmd = [args.gdsbench, "-D", args.dir, "-x", str(args.xfer), "-I", "0", "-w", str(args.threads),
           "-s", args.size, "-i", args.io_size, "-T", str(args.seconds)]
    if args.xfer in GPU_XFER_TYPES:
        cmd += ["-d", str(args.gpu)]
    topo = topology()
    stats = gds_stats_tool(args.gds_stats, args.cufile_json)
    print("job: %s" % " ".join(cmd))
    print("gds_stats: %s%s" % (stats[0] or "not used", "; note: %s" % stats[1] if stats[1] else ""))
    rows, runs = [], []
    for rnd in range(1, args.rounds + 1):
        order = (False, True) if rnd % 2 else (True, False)
        row = {}
        for watched in order:
            rec_path = os.path.join(args.out, "r%d-%s.json" % (rnd, "watched" if watched else "bare"))
            record, entry, checks = one_run(args, cmd, rec_path, watched, topo, stats)
            row[watched] = (record or {}).get("throughput_gib_s")
            runs.append({"round": rnd, "watched": watched, "record": record, "watch": entry, "checks": checks})
            if watched and record:
                print("round %d watched run:" % rnd)
                report_watch(record, entry, checks, args.gpu)
        rows.append(row)
    print("\nround  bare GiB/s  watched GiB/s  watched/bare   (order alternates: odd rounds bare first)")
    ratios = []
    for rnd, row in enumerate(rows, 1):
        bare, watched = row.get(False), row.get(True)
        ratio = watched / bare if bare and watched else None
        if ratio:
            ratios.append(ratio)
        print("%5d  %10s  %13s  %12s" % (rnd, "%.3f" % bare if bare else "-", "%.3f" % watched if watched else "-",
                                         "%.4f" % ratio if ratio else "-"))
    bares = [r[False] for r in rows if r.get(False)]
    watcheds = [r[True] for r in rows if r.get(True)]
    summary = {"rounds": len(rows), "ratios": ratios}
    if ratios:
        median = statistics.median(ratios)
        spread = (max(bares) - min(bares)) / statistics.median(bares) if len(bares) > 1 else 0.0
        low, high = median_interval(ratios)
        summary.update(median_ratio=median, overhead_pct=round((1 - median) * 100, 2), bare_spread_pct=round(spread * 100, 2),
                       bare_median=statistics.median(bares), watched_median=statistics.median(watcheds),
                       ratio_interval_95=[round(low, 4), round(high, 4)])
        # judged on the paired ratios' 95 % interval, not on one median: noise is not a result
        if len(ratios) < MIN_ROUNDS:
            verdict = "not resolved: %d rounds are too few for an interval (%d or more)" % (len(ratios), MIN_ROUNDS)
        elif low >= 0.99:
            verdict = "met (the whole 95 % interval is under 1 % overhead)"
        elif high < 0.99:
            verdict = "NOT met (the whole 95 % interval is over 1 % overhead)"
        else:
            verdict = "not resolved: the 95 %% interval [%.4f, %.4f] straddles 0.99" % (low, high)
        summary["verdict"] = verdict
        print("median: bare %.3f GiB/s, watched %.3f GiB/s, watched/bare %.4f (95 %% interval %.4f-%.4f): overhead "
              "%.2f %% (bare runs spread %.2f %% between themselves); the target is < 1 %%: %s"
              % (summary["bare_median"], summary["watched_median"], median, low, high, summary["overhead_pct"],
                 summary["bare_spread_pct"], verdict))
    cpu = [(r["watched"], (r["record"] or {}).get("cpu")) for r in runs]
    shares = [c["watch_s"] / c["gdsbench_s"] for w, c in cpu if w and c and c["gdsbench_s"]]
    cores = [c["watch_s"] / c["wall_s"] for w, c in cpu if w and c and c["wall_s"]]
    idle = [c["watch_s"] / c["wall_s"] for w, c in cpu if not w and c and c["wall_s"]]
    if shares:
        summary.update(watch_cpu_pct_of_gdsbench=round(100 * statistics.median(shares), 3),
                       watch_cpu_pct_of_core=round(100 * statistics.median(cores), 3),
                       bare_cpu_pct_of_core=round(100 * statistics.median(idle), 3) if idle else None)
        print("CPU (median of the watched runs): the watch took %.2f %% of one core, %.2f %% of the CPU time "
              "gdsbench used; this process without the watch: %s %% of one core"
              % (summary["watch_cpu_pct_of_core"], summary["watch_cpu_pct_of_gdsbench"], summary["bare_cpu_pct_of_core"]))
    with open(os.path.join(args.out, "watch.json"), "w") as handle:
        json.dump({"cmd": cmd, "summary": summary, "runs": runs}, handle, indent=1, default=str)
    print("records: %s" % os.path.join(args.out, "watch.json"))
    return 0 if ratios else 1


if __name__ == "__main__":
    sys.exit(main())
