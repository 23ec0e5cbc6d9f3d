#!/usr/bin/env python3
"""How long the cufile.json text parsers take on a hostile file: one object holding the same key
N times (5k, 20k, 200k), one per indented line as an editor writes it. Target: linear, 200k keys
(about 4.6 MB) in under a second for loads() and duplicate_keys() each. The peer is Python's own
json.loads (C) on the same text; the ratio is ours over it. Prints figures; asserts nothing.
(gds_cufile refuses a file over tune/cufile_text.MAX_BYTES before parsing; this times the
parsers themselves.)

  .venv/bin/python tests/perf/cufile_parse_perf.py [-n 3]
"""
import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "collections"))
from ansible_collections.gds.commission.plugins.module_utils.tune import cufile_text  # noqa: E402


def hostile(keys):
    lines = ['    "max_direct_io_size_kb": %d' % i for i in range(keys)]
    return '{\n  "properties": {\n' + ",\n".join(lines) + "\n  }\n}\n"


def timed(call, text, runs):
    times = []
    for dummy in range(runs):
        start = time.perf_counter()
        call(text)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=3, help="runs per figure (the median is printed)")
    args = parser.parse_args()
    print("%8s %9s %9s %16s %11s %9s" % ("keys", "MB", "loads_s", "duplicate_keys_s", "json.loads_s", "ratio"))
    for keys in (5000, 20000, 200000):
        text = hostile(keys)
        ours = timed(cufile_text.loads, text, args.n)
        dups = timed(cufile_text.duplicate_keys, text, args.n)
        peer = timed(json.loads, text, args.n)
        print("%8d %9.2f %9.3f %16.3f %11.4f %9.1f" % (keys, len(text) / 1e6, ours, dups, peer, (ours + dups) / peer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
