"""Lets the lab scripts beside this file (watch_overhead.py, nvml_pcie_probe.py) import the
collection's module_utils by their collection names, without ansible-core: the lab is the
repository's bench/, and the repository's collections/ directory (the one above
ansible_collections/) goes first on sys.path."""
from __future__ import annotations

import os
import sys


def use_collection(script):
    """Put the repository's collections/ directory (the lab's ../collections) on sys.path."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(script))), "collections")
    if not os.path.isdir(os.path.join(root, "ansible_collections", "gds", "commission")):
        sys.exit("%s: no collection at %s/ansible_collections/gds/commission" % (script, root))
    sys.path.insert(0, root)
