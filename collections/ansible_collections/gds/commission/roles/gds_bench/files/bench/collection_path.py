"""Lets the lab scripts beside this file (watch_overhead.py, nvml_pcie_probe.py) import the
collection's module_utils by their collection names, without ansible-core: this directory is the
gds_bench role's files/bench/, in the repository or in an installed collection, and the directory
above ansible_collections/ goes first on sys.path."""
from __future__ import annotations

import os
import sys


def use_collection(script):
    """Put the directory above the ansible_collections/ tree that holds ``script`` on sys.path."""
    here = os.path.dirname(os.path.realpath(script))
    while os.path.basename(here) != "ansible_collections":
        if os.path.dirname(here) == here:
            sys.exit("%s: not inside an ansible_collections tree" % script)
        here = os.path.dirname(here)
    sys.path.insert(0, os.path.dirname(here))
