#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: gds_p2pdma_probe
short_description: Ask the kernel for each P2PDMA pair with a real transfer, and hold the prediction against it
description:
  - For every PCI function that publishes peer-to-peer memory (C(p2pmem), e.g. an NVMe controller
    memory buffer) and every benchmark target, writes a file of gdsbench's verify pattern to the
    target, reads it with O_DIRECT into the function's memory (gdsbench C(--peer-memory)), checks
    every byte and keeps the kernel's log lines of the transfer (C(/dev/kmsg)).
  - "Holds that answer against the kernel's decision the product predicted (the C(p2pdma) facts of
    M(gds.commission.gds_topology)); for a target of several drives the worst of its members'
    pairs. One check C(p2pdma: <target> into <provider>) each - PASS when they agree, FAIL when not,
    WARN when the prediction was unknown; one SKIP when no function publishes p2pmem (a GPU's own
    memory is not mapped this way)."
  - The probe file is its own; it is removed again only while it is still that file. The
    directory is the target's benchmark directory (created and removed again when missing).
version_added: "1.3.0"
author: gds-commission contributors (!UNKNOWN)
options:
  binary:
    description: The compiled gdsbench on the node.
    type: path
    required: true
  arrays:
    description:
      - The benchmark targets, as the gds_bench role's C(gds_bench_arrays) lists them - C(mount),
        C(members) (drive names of the gds_topology facts), C(label), C(target) (the benchmark
        directory, default C(<mount>/gds-bench)).
    type: list
    elements: dict
    required: true
  topology:
    description: The gds_topology facts (their C(p2pdma) and C(nvme)).
    type: dict
    required: true
  size_mb:
    description: MiB read into each provider's memory (a CMB is small; 16 MiB in the QEMU guest).
    type: int
    default: 4
  timeout:
    description: The most seconds one gdsbench run may take.
    type: int
    default: 60
extends_documentation_fragment:
  - gds.commission.gds
  - gds.commission.gds.no_diff
  - gds.commission.gds.sysfs
notes:
  - Needs root (the kernel log, p2pmem/allocate). Does nothing in check mode (a transfer is a measurement).
seealso:
  - module: gds.commission.gds_topology
  - module: gds.commission.gds_bench
"""

EXAMPLES = r"""
- name: Hold the P2PDMA prediction against the kernel on every array
  gds.commission.gds_p2pdma_probe:
    binary: /var/cache/gds-commission/bench/gdsbench
    arrays: "{{ gds_bench_arrays }}"
    topology: "{{ ansible_facts['gds_topology'] }}"
"""

RETURN = r"""
answers:
  description:
    - One per provider and target - C(provider), C(target), C(members), C(clients) (their
      controllers), C(predicted) and C(reason), C(moved) (the bytes arrived and verified),
      C(bytes), C(verify_errors), C(seconds), C(error), C(kernel_log) (the kernel's P2PDMA, ACS,
      DMAR and I/O error lines of the transfer; null when unread).
  returned: always
  type: list
  elements: dict
checks:
  description: "C(p2pdma: <target> into <provider>) per answer, or one C(p2pdma: peer memory probe) SKIP."
  returned: always
  type: list
  elements: dict
"""

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.module import SYSFS_ROOT
from ansible_collections.gds.commission.plugins.module_utils.core.module import GdsModule as AnsibleModule  # results valid UTF-8
from ansible_collections.gds.commission.plugins.module_utils.measure.p2p_probe import probe


def main():
    module = AnsibleModule(
        argument_spec=dict(
            binary=dict(type="path", required=True),
            arrays=dict(type="list", elements="dict", required=True),
            topology=dict(type="dict", required=True),
            size_mb=dict(type="int", default=4),
            timeout=dict(type="int", default=60),
            sysfs_root=SYSFS_ROOT,
        ),
        supports_check_mode=True,
        check_area="p2pdma",
    )
    p = module.params
    if not 1 <= p["size_mb"] <= 1024 or not 1 <= p["timeout"] <= 3600:
        module.fail_json(msg="size_mb must be 1..1024 and timeout 1..3600; got %r and %r" % (p["size_mb"], p["timeout"]))
    if module.check_mode:
        module.exit_json(changed=False, answers=[], checks=[check("p2pdma: peer memory probe", "SKIP", "probed",
                                                                  None, "check mode measures nothing")])
    answers, checks = probe(p["binary"], p["arrays"], p["topology"], p["sysfs_root"], p["size_mb"] << 20, p["timeout"])
    module.exit_json(changed=False, answers=answers, checks=checks)


if __name__ == "__main__":
    main()
