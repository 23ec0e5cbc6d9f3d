#!/usr/bin/env python3
"""The table of bench/parity.sh: gdsbench's read modes against the best GPU-landing peer of
each round (no GPU needed for the table).

  parity.py table RUNS OUTDIR [--require] [--min-rounds N]
      RUNS: the runs of bench/side_by_side.py's record format (JSON lines). Writes OUTDIR/parity.md
      and OUTDIR/parity.json and prints the markdown: per workload, tool and round the figure;
      for every gdsbench mode its ratio to the best GPU-landing peer of the same round (fio's
      libcufile engine, in processes or --thread, whichever moved more) and to plain O_DIRECT
      (fio psync: no GPU, what the compat path costs), the mean ratio with a bootstrap 95 %
      interval over the rounds, the lowest round, and whether every round was at or above the
      peer. A round whose peers have no figure gives that round no ratio, and the mode's "every
      round" is then unknown, never yes. --require: exit 3 when a gdsbench mode is below or
      unknown in a round; exit 4 when fewer than --min-rounds (5) rounds have a peer figure.

Workloads: seqread in GiB/s, randread in IOPS.
"""
import json
import random
import statistics
import sys

PEERS = ("fio-cufile-procs", "fio-cufile-threads")  # land in GPU memory through libcufile
POSIX = "fio-psync"  # plain O_DIRECT into host memory
METRIC = {"seqread": "gib_s", "randread": "iops"}
TITLE = {"seqread": "1 MiB sequential reads, 8 workers (GiB/s)", "randread": "4 KiB random reads, 32 workers (IOPS)"}
AIM = 1.1
RESAMPLES = 10000
SEED = 31  # fixed: the same runs give the same interval


def bootstrap_ci(values, level=0.95, resamples=RESAMPLES, seed=SEED):
    """Percentile interval of the mean of ``values`` over resamples with replacement; None for none."""
    if not values:
        return None
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(resamples))
    tail = (1 - level) / 2
    return [means[int(tail * (resamples - 1))], means[int((1 - tail) * (resamples - 1))]]


def _value(run, metric):
    v = run.get(metric)
    if run.get("rc", 0) != 0 or run.get("errors") or not isinstance(v, (int, float)) or v != v or v < 0:
        return None
    return float(v)


def build(runs):
    """{workload: {"metric", "rounds", "best_peer": {round: {tool, value}}, "posix": {round: value},
    "tools": {tool: {"values", "ratio", "vs_posix", "mean", "ci", "lowest", "every_round"}}}}"""
    out = {}
    for r in runs:
        wl = r.get("workload")
        if wl not in METRIC:
            continue
        t = out.setdefault(wl, {"metric": METRIC[wl], "tools": {}})
        t["tools"].setdefault(r["tool"], {"values": {}, "notes": []})["values"][int(r["round"])] = \
            _value(r, METRIC[wl])
        if r.get("note"):
            t["tools"][r["tool"]]["notes"].append("round %s: %s" % (r["round"], r["note"]))
    for t in out.values():
        rounds = sorted({n for e in t["tools"].values() for n in e["values"]})
        t["rounds"] = rounds
        t["best_peer"], t["posix"] = {}, {}
        for n in rounds:
            cands = [(t["tools"][p]["values"].get(n), p) for p in PEERS if p in t["tools"]]
            cands = [c for c in cands if c[0]]
            t["best_peer"][n] = {"tool": max(cands)[1], "value": max(cands)[0]} if cands else None
            t["posix"][n] = t["tools"].get(POSIX, {}).get("values", {}).get(n)
        for name, e in t["tools"].items():
            if not name.startswith("gdsbench"):
                continue
            e["ratio"] = {n: e["values"][n] / t["best_peer"][n]["value"]
                          if e["values"].get(n) is not None and t["best_peer"][n] else None for n in rounds}
            e["vs_posix"] = {n: e["values"][n] / t["posix"][n]
                             if e["values"].get(n) is not None and t["posix"][n] else None for n in rounds}
            known = [x for x in e["ratio"].values() if x is not None]
            e["mean"] = statistics.fmean(known) if known else None
            e["ci"] = bootstrap_ci(known)
            e["lowest"] = min(known) if known else None
            e["every_round"] = None if len(known) < len(rounds) or not rounds else all(x >= 1.0 for x in known)
    return out


def _fig(v, metric):
    return "-" if v is None else ("%.0f" % v if metric == "iops" else "%.3f" % v)


def _ratio(v):
    return "-" if v is None else "%.2f" % v


def markdown(table):
    out = ["# Read parity (bench/parity.sh)", "",
           "Per round: the figure; for gdsbench, its ratio to the best GPU-landing peer of that round (fio's",
           "libcufile engine, processes or `--thread`, whichever moved more) and, in brackets, to plain O_DIRECT",
           "(fio psync: no GPU; the gap is what cuFile's compat path costs). Mean ratio with a bootstrap 95 %",
           "interval over the rounds (%d resamples), the lowest round. Goal: every mode >= 1.00 in every round"
           % RESAMPLES, "(aim %.2f). `-`: no figure (a failed run, or no peer that round)." % AIM, ""]
    for wl in [w for w in METRIC if w in table]:
        t = table[wl]
        metric, rounds = t["metric"], t["rounds"]
        out += ["## %s" % TITLE[wl], "",
                "| tool | " + " | ".join("r%d" % n for n in rounds) + " | ratio per round (vs O_DIRECT) | "
                "mean [95 % CI] | lowest | every round >= 1 |",
                "|---|" + "---|" * len(rounds) + "---|---|---|---|"]
        for name in sorted(t["tools"], key=lambda n: (not n.startswith("gdsbench"), n)):
            e = t["tools"][name]
            figs = " | ".join(_fig(e["values"].get(n), metric) for n in rounds)
            if "ratio" not in e:
                role = "peer" if name in PEERS else "O_DIRECT, no GPU" if name == POSIX else "other"
                out.append("| %s (%s) | %s | | | | |" % (name, role, figs))
                continue
            per = " ".join("%s (%s)" % (_ratio(e["ratio"][n]), _ratio(e["vs_posix"][n])) for n in rounds)
            ci = "-" if e["ci"] is None else "%.2f [%.2f, %.2f]" % (e["mean"], e["ci"][0], e["ci"][1])
            verdict = {True: "yes", False: "**no**", None: "unknown"}[e["every_round"]]
            out.append("| %s | %s | %s | %s | %s | %s |" % (name, figs, per, ci, _ratio(e["lowest"]), verdict))
        best = ", ".join("r%d %s" % (n, b["tool"] if b else "-") for n, b in t["best_peer"].items())
        out += ["", "Best peer per round: %s." % best]
        notes = ["%s: %s" % (name, note) for name, e in sorted(t["tools"].items()) for note in e["notes"]]
        out += ([""] + ["- " + n for n in notes]) if notes else []
        out.append("")
    return "\n".join(out) + "\n"


def missed(table):
    """The gdsbench modes below the peer, or unknown, in some round: ["seqread gdsbench-x6 (...)", ...]"""
    out = []
    for wl, t in table.items():
        for name, e in sorted(t["tools"].items()):
            if "ratio" in e and e["every_round"] is not True:
                out.append("%s %s (lowest %s, %s)" % (wl, name, _ratio(e["lowest"]),
                                                      "unknown rounds" if e["every_round"] is None else "below"))
    return out


def counted_rounds(table):
    """Rounds with a peer figure in every workload."""
    per = [{n for n, b in t["best_peer"].items() if b} for t in table.values()]
    return len(set.intersection(*per)) if per else 0


def table_cmd(argv):
    require = "--require" in argv
    argv = [a for a in argv if a != "--require"]
    min_rounds = 5
    if "--min-rounds" in argv:
        i = argv.index("--min-rounds")
        min_rounds = int(argv[i + 1])
        del argv[i:i + 2]
    if len(argv) != 2:
        raise SystemExit("usage: parity.py table RUNS OUTDIR [--require] [--min-rounds N]")
    runs = []
    with open(argv[0]) as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    runs.append(json.loads(line))
                except ValueError as exc:
                    raise SystemExit("%s line %d: not JSON (%s)" % (argv[0], n, exc))
    table = build(runs)
    md = markdown(table)
    with open(argv[1] + "/parity.md", "w") as f:
        f.write(md)
    with open(argv[1] + "/parity.json", "w") as f:
        json.dump({wl: dict(t, rounds=t["rounds"]) for wl, t in table.items()}, f, indent=1, sort_keys=True)
    sys.stdout.write(md)
    rounds, below = counted_rounds(table), missed(table)
    print("rounds with a peer figure: %d (at least %d count)" % (rounds, min_rounds))
    print("PARITY: %s" % ("met: every mode at or above the best GPU-landing peer in every round" if not below
                          else "missed: " + "; ".join(below)))
    if rounds < min_rounds:
        return 4 if require else 0
    return 3 if require and below else 0


def main(argv):
    if list(argv[:1]) in (["-h"], ["--help"]):  # the usage, before anything is read or written
        print(__doc__)
        return 0
    if not argv or argv[0] != "table":
        raise SystemExit(__doc__)
    return table_cmd(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
