#!/usr/bin/env python3
"""How long gds_topology's own work takes on the fixture topologies (not Ansible's start-up).

Builds each fixture tree, then times discover() + the affinity table: cold (first read, the
way a play runs it once per node) and warm (page cache hot), median of N runs. Target: under
0.2 s on the DGX-2 fixture. Prints figures; asserts nothing.

  .venv/bin/python tests/perf/topology_perf.py [-n 30]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "fixtures"))

sys.path.insert(0, os.path.join(ROOT, "collections"))  # the collection's code, as ansible_collections.*
import simtree  # noqa: E402
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import affinity_table, discover  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=30)
    args = parser.parse_args()
    print("%-10s %6s %6s %6s %8s %9s %9s" % ("fixture", "pci", "gpus", "nvme", "matrix", "first_ms", "median_ms"))
    with tempfile.TemporaryDirectory() as tmp:
        for fixture in ("dgx2", "dgx-a100", "hgx-h100", "cloud-vm"):
            root = simtree.build(fixture, os.path.join(tmp, fixture))
            sys_root, proc_root = os.path.join(root, "sys"), os.path.join(root, "proc")
            times = []
            for _ in range(args.n):
                start = time.perf_counter()
                facts, _ = discover(sys_root, proc_root)
                affinity_table(facts)
                times.append(time.perf_counter() - start)
            pci = len(os.listdir(os.path.join(sys_root, "bus", "pci", "devices")))
            cells = sum(len(row) for row in facts["matrix"].values())
            print("%-10s %6d %6d %6d %8d %9.1f %9.1f" % (fixture, pci, len(facts["gpus"]), len(facts["nvme"]),
                                                      cells, times[0] * 1e3, statistics.median(times) * 1e3))


if __name__ == "__main__":
    main()
