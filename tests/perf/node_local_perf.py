#!/usr/bin/env python3
"""What a node-local run and the merge cost (docs/fleet.md#the-cost-model).

1. One simulated node (a dgx-a100 fixture) commissions itself, then checks itself for drift, as
   srun starts scripts/gds-node-run on each node: connection local, the report in host scope.
   Printed for each: wall seconds, CPU seconds of the whole run (ansible-playbook, its workers and
   the module runs: on a real node all of it is the node's own), peak RSS, and the bytes the node
   wrote into the shared run directory.
2. The merge of a run of N such nodes: each run's inputs file copied for N hosts (each
   named, as gds-node-run would have written it), then scripts/gds-merge over the N hosts. Printed
   for each N: wall and CPU seconds of the merge, its peak RSS, the bytes it read and wrote.

Asserts nothing; prints a Markdown table. Needs a checkout with `make venv` (the .venv beside it).

    .venv/bin/python tests/perf/node_local_perf.py --sizes 8,256,1000
    .venv/bin/python tests/perf/node_local_perf.py --sizes 10000 --modes drift
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))
import simtree  # noqa: E402  (tests/fixtures/simtree.py builds the fixture trees)

NODE = "fleet-0001"


def measured(argv, env, timeout):
    """(returncode, wall s, CPU s, peak RSS MB) of one command and the processes it waited for
    (os.wait4: this child's own rusage, not the largest of every child so far)."""
    start = time.monotonic()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):
            out.seek(0)
            sys.stderr.write(out.read()[-6000:].decode("utf-8", "replace"))
    return proc.returncode, time.monotonic() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0


def tree_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def node_runs(work):
    """Commission, then drift, of one simulated node against itself; [(row)], {mode: its run dir}."""
    simtree.build("dgx-a100", os.path.join(work, "sim", NODE))
    shared = os.path.join(work, "shared")
    bin_dir = os.path.join(ROOT, ".venv", "bin")
    env = dict(os.environ, GDS_REPORTS_DIR=shared, GDS_SIM_ROOT=os.path.join(work, "sim"), GDS_NODE_NAME=NODE,
               GDS_NODE_PLATFORM="dgx_a100", GDS_NODE_GROUPS="simulated", PATH=bin_dir + os.pathsep + os.environ["PATH"],
               ANSIBLE_PLAYBOOK=os.path.join(bin_dir, "ansible-playbook"))
    rows = []
    for run_id, extra in (("node-commission", []), ("node-drift", ["--drift"])):
        rc, wall, cpu, rss = measured([os.path.join(ROOT, "scripts", "gds-node-run"), "--run-id", run_id] + extra,
                                      env, timeout=1800)
        run_dir = os.path.join(shared, run_id)
        written = tree_bytes(run_dir) if os.path.isdir(run_dir) else 0
        rows.append(("node-local %s, 1 node" % ("drift" if extra else "commission"), rc, wall, cpu, rss, written))
    return rows, {"commission": os.path.join(shared, "node-commission"), "drift": os.path.join(shared, "node-drift")}


def merge_runs(work, mode, node_dir, sizes):
    name = NODE + ".inputs.json"
    with open(os.path.join(node_dir, name), encoding="utf-8") as handle:
        record = json.load(handle)
    rows = []
    for size in sizes:
        run_id = "merge-%s-%d" % (mode, size)
        reports = os.path.join(work, "merge-reports")
        run_dir = os.path.join(reports, run_id)
        os.makedirs(run_dir)
        hosts = ["fleet-%04d" % i for i in range(1, size + 1)]
        for host in hosts:
            record.update(host=host, run_id=run_id)
            with open(os.path.join(run_dir, host + ".inputs.json"), "w", encoding="utf-8") as handle:
                json.dump(record, handle, separators=(",", ":"))
        read = tree_bytes(run_dir)
        with open(os.path.join(work, "hosts-%d" % size), "w") as handle:
            handle.write("\n".join(hosts) + "\n")
        rc, wall, cpu, rss = measured([sys.executable, os.path.join(ROOT, "scripts", "gds-merge"), "--run-id", run_id,
                                       "--reports-dir", reports, "--hosts", os.path.join(work, "hosts-%d" % size)],
                                      dict(os.environ), timeout=3600)
        rows.append(("merge of %s, %d nodes (read %.1f MB)" % (mode, size, read / 1e6), rc, wall, cpu, rss,
                     tree_bytes(run_dir) - read))
        shutil.rmtree(reports)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8,256,1000", help="merge sizes, comma separated")
    parser.add_argument("--modes", default="commission,drift", help="which runs' merges, comma separated")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="gds-node-local-perf-")
    try:
        rows, node_dirs = node_runs(work)
        for mode in [m for m in args.modes.split(",") if m]:
            node_dir = node_dirs[mode]
            rows += merge_runs(work, mode, node_dir, [int(size) for size in args.sizes.split(",") if size])
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("| run | rc | wall s | CPU s | peak RSS MB | bytes written |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for what, rc, wall, cpu, rss, written in rows:
        print("| %s | %d | %.1f | %.1f | %.0f | %d |" % (what, rc, wall, cpu, rss, written))
    print("load average at the end: %s" % open("/proc/loadavg").read().split()[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
