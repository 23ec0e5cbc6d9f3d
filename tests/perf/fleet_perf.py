#!/usr/bin/env python3
"""Wall time and controller memory of commissioning and drift over N simulated nodes.

For each N: a generated inventory (tests/fixtures/fleet.py, fixtures mixed) and fresh simulated
trees, then `commission.yml` (tune, benchmark, report) and `drift.yml` on the commissioned nodes,
each in its own ansible-playbook process. Prints per run: wall seconds, the ratio to N=1, CPU
seconds of the controller process and of its workers and modules, and the controller's peak RSS
(ru_maxrss of the ansible-playbook process; workers are forks of it). Asserts nothing.

  .venv/bin/python tests/perf/fleet_perf.py [--sizes 1,16,64,256] [--playbooks commission,drift]
                                            [--fixtures dgx-a100,...] [--work DIR] [--forks N]

--fixtures dgx-a100 makes every node an A100 (no node stops early); ansible-playbook is the one
beside the interpreter that runs this script.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
import fleet  # noqa: E402

# run ansible-playbook in this interpreter, then report the process's own and its children's usage
WRAPPER = r"""
import json, resource, runpy, sys
out, profile = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[3:]
code = 0
profiler = None
if profile:  # CPU time of this process only: the forked workers stop profiling
    import cProfile, os, time
    profiler = cProfile.Profile(time.process_time)
    os.register_at_fork(after_in_child=profiler.disable)
    profiler.enable()
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
finally:
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "w") as handle:
        json.dump({"self_cpu": me.ru_utime + me.ru_stime, "children_cpu": kids.ru_utime + kids.ru_stime,
                   "self_maxrss_kb": me.ru_maxrss, "children_maxrss_kb": kids.ru_maxrss}, handle)
sys.exit(code)
"""


def run(playbook, size, work, forks, log, profile=""):
    inv, sim, reports = (os.path.join(work, "inv%d" % size), os.path.join(work, "sim%d" % size),
                         os.path.join(work, "reports%d" % size))
    usage = os.path.join(work, "usage.json")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), GDS_SIM_ROOT=sim,
               GDS_REPORTS_DIR=reports, PYTHONDONTWRITEBYTECODE="1")
    env.pop("GDS_RUN_ID", None)
    env.pop("GDS_RUN_STATE", None)
    if forks:
        env["ANSIBLE_FORKS"] = str(forks)
    argv = [sys.executable, "-c", WRAPPER, usage, profile, os.path.join(os.path.dirname(sys.executable), "ansible-playbook"),
            "-i", inv, os.path.join(ROOT, "playbooks", playbook + ".yml")] + (["--check"] if playbook == "drift" else [])
    start = time.monotonic()
    with open(log, "w") as handle:
        rc = subprocess.call(argv, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    wall = time.monotonic() - start
    with open(usage) as handle:
        figures = json.load(handle)
    figures.update(rc=rc, wall=wall)
    return figures


def verdicts(work, size):
    """PASS/FAIL/... counts of the last commissioning report, drifted count of the last drift."""
    latest = os.path.join(work, "reports%d" % size, "latest")
    out = []
    try:
        with open(os.path.join(latest, "summary.json")) as handle:
            out.append(" ".join("%s=%d" % kv for kv in sorted(json.load(handle)["counts"].items()) if kv[1]))
    except (OSError, ValueError, KeyError):
        pass
    try:
        with open(os.path.join(latest, "drift.json")) as handle:
            hosts = json.load(handle)["hosts"]
        out.append("drifted=%d" % sum(1 for h in hosts.values() if h.get("drifted") is not False))
    except (OSError, ValueError, KeyError):
        pass
    return " ".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,16,64,256")
    parser.add_argument("--playbooks", default="commission,drift")
    parser.add_argument("--work", help="keep inventories, trees, reports and logs here (default: a temp dir)")
    parser.add_argument("--forks", type=int, help="ANSIBLE_FORKS for the runs (default: ansible.cfg)")
    parser.add_argument("--profile", action="store_true",
                        help="profile the ansible-playbook process (cProfile, WORK/PLAYBOOK-N.prof; its CPU "
                             "figures then include the profiler's cost)")
    parser.add_argument("--fixtures", default=",".join(fleet.DEFAULT_FIXTURES),
                        help="fixtures of the nodes, round robin (default: %(default)s)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    fixtures = tuple(f for f in args.fixtures.split(",") if f)
    playbooks = [p for p in args.playbooks.split(",") if p]
    src = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission", "roles", "gds_bench",
                       "files", "bench")
    if "commission" in playbooks and not os.path.exists(os.path.join(src, "gdsbench")):
        subprocess.check_call(["make", "-s", "-C", src])
    work = args.work or tempfile.mkdtemp(prefix="gds-fleet-perf-")
    os.makedirs(work, exist_ok=True)
    print("work directory %s, %d CPU(s)" % (work, os.cpu_count()))
    # cpu_s/node: all CPU seconds of the run over the nodes; on a simulated fleet every node's module
    # runs share the controller's cores, so wall time cannot fall below nodes x cpu_s/node / cores
    # ctrl_s/node: the ansible-playbook process alone (one thread: it bounds a real fleet's run)
    header = "%-10s %5s %9s %6s %8s %12s %12s %13s %11s %12s  %s" % (
        "playbook", "nodes", "wall_s", "ratio", "s/node", "ctrl_cpu_s", "ctrl_s/node", "worker_cpu_s", "cpu_s/node",
        "ctrl_rss_mb", "rc / result")
    print(header)
    base = {}
    for size in sizes:
        fleet.write(size, os.path.join(work, "inv%d" % size), os.path.join(work, "sim%d" % size), fixtures)
        for playbook in playbooks:
            log = os.path.join(work, "%s-%d.log" % (playbook, size))
            profile = os.path.join(work, "%s-%d.prof" % (playbook, size)) if args.profile else ""
            f = run(playbook, size, work, args.forks, log, profile)
            base.setdefault(playbook, f["wall"])
            print("%-10s %5d %9.1f %6.2f %8.2f %12.1f %12.2f %13.1f %11.2f %12.0f  rc=%d %s" % (
                playbook, size, f["wall"], f["wall"] / base[playbook], f["wall"] / size, f["self_cpu"],
                f["self_cpu"] / size, f["children_cpu"], (f["self_cpu"] + f["children_cpu"]) / size, f["self_maxrss_kb"] / 1024.0, f["rc"],
                verdicts(work, size)), flush=True)
        if not args.work:
            shutil.rmtree(os.path.join(work, "sim%d" % size), ignore_errors=True)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
