# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's interface (its area's ``ROLE_SPEC``), in playbook order: the one table that
``make roles`` writes the roles' defaults, argument specs and docs/variables.md from, and that the
variable checks (``ROLE_VARIABLES``: each role's variable names and their validator) read."""
from __future__ import annotations

import re

from ansible_collections.gds.commission.plugins.module_utils.core.spec import EntryPoint, RoleSpec, Var
from ansible_collections.gds.commission.plugins.module_utils.fleet import merge, report, slurm
from ansible_collections.gds.commission.plugins.module_utils.hw import affinity
from ansible_collections.gds.commission.plugins.module_utils.measure import perftest, plan
from ansible_collections.gds.commission.plugins.module_utils.tune import acs, cufile, driver, iommu, mounts, raid, rdma, reboot

# The internal role every tuning role imports first: which role's variables to check, and the facts it needs.
COMMON = RoleSpec(
    'gds_common', 'gds_common_',
    short_description="Internal only; the collection's roles import its other entry points",
    description=('Internal role of gds.commission. The tuning roles import C(validate_role) as their first task '
                 "and every role's C(validate) entry point is C(validate_vars); run by itself the role fails.",),
    variables=[
        Var('gds_common_facts', 'list',
            'Entry point `validate_role`: the facts (`gds_topology`, `gds_platform`) the importing role decides '
            'from; gds_facts must have read them in this run.',
            [],
            choices=('gds_topology', 'gds_platform'),
            elements='str'),
        Var('gds_common_role', 'str',
            "The importing role's name: whose `validate` runs, and which variables (its names' pattern) which "
            'validator checks (`ROLE_VARIABLES` in `plugins/module_utils/roles.py`).',
            required=True),
    ],
    shared=(),
    main_variables=['gds_common_facts'],
    entry_points={
        'validate_role': EntryPoint(
            'Internal only; the first task of a role that tune.yml validates',
            ("Checks that the facts the role decides from were read in this run, then runs the role's "
             "C(validate) entry point unless tune.yml's first play checked it on this host "
             '(C(gds_tune_validated.checked_roles)).'),
            variables=['gds_common_role', 'gds_common_facts']),
        'validate_vars': EntryPoint(
            "Internal only; the one task of a role's validate entry point",
            ("The role's variables checked by its validator in Python (the C(gds_validate) filter); each problem "
             'names the variable and the value.'),
            variables=['gds_common_role']),
    },
)


class TuneStep(object):
    """One step of the tuning procedure: its role (the ``steps`` entry point), the task's name,
    its tags and why it stands where it does."""

    def __init__(self, role, name, tags, why=""):
        self.role, self.name, self.tags, self.why = role, name, tuple(tags), why


# The tuning procedure of tune.yml and drift.yml (gds_tune's tasks/main.yml, written by make roles),
# in the order an admin follows it
TUNE_STEPS = (
    TuneStep("gds_facts", "Read the topology and the platform", ["facts", "always"],
             "the topology and the platform facts, read once; every step below decides from them"),
    TuneStep("gds_pcie_acs", "Set PCIe ACS on the bridges between GPUs, drives and NICs", ["pcie_acs", "acs"],
             "platform: PCIe ACS off on the GPU/NVMe/NIC bridges, the IOMMU mode, the GDS driver mode"),
    TuneStep("gds_iommu", "Set the IOMMU mode", ["iommu"]),
    TuneStep("gds_driver", "Set the GPUDirect Storage driver mode", ["gds_driver", "driver"]),
    TuneStep("gds_rdma", "Set up GPUDirect RDMA", ["gds_rdma", "rdma"],
             "GPUDirect RDMA: peer memory for the NICs (after gds_driver, which may already load it), the "
             "GPU-NIC pairing and the RDMA port state and rate"),
    TuneStep("gds_netfs", "Audit the network mounts", ["gds_netfs", "netfs"],
             "network file systems: each mount's transport, rsize/wsize and the NIC it leaves through against "
             "the GPUs that read it (before gds_cufile, which lists the mounts' RDMA addresses)"),
    TuneStep("gds_raid", "Group the NVMe drives into arrays by affinity", ["nvme_raid"],
             "after gds_driver: regroup the data drives per affinity group, then the matching cufile.json"),
    TuneStep("gds_cufile", "Write cufile.json", ["cufile"]),
)
# the roles whose variables validate.yml's play checks before anything runs (each has a
# `validate` entry point): the steps, and gds_reboot, which tune.yml runs last
CHECKED_ROLES = tuple(step.role for step in TUNE_STEPS) + ("gds_reboot",)

# The internal role that runs the tuning steps in order (tune.yml, drift.yml); each step's role
# owns its variables, validate.yml's play checks them all.
TUNE = RoleSpec(
    "gds_tune", "gds_tune_",
    short_description="Internal only; the tuning procedure of tune.yml and drift.yml, each step's role in order",
    description=("Reads the topology and the platform (gds_facts), then runs each tuning role's C(steps) entry point: "
                 "%s." % ", ".join(step.role for step in TUNE_STEPS[1:]),
                 "Its C(validate) tasks check every step's variables in one task per host (validate.yml's play)."),
    variables=[], shared=())


# the area of each role, in playbook order (the module whose ROLE_SPEC it is)
AREAS = (affinity, acs, iommu, driver, rdma, mounts, raid, cufile, reboot, plan, perftest, report, merge, slurm)
SPECS = tuple(area.ROLE_SPEC for area in AREAS) + (COMMON, TUNE)
BY_NAME = dict((spec.name, spec) for spec in SPECS)
# old role name -> the role it became (named for its variables); the old names stay as roles of
# their own for the deprecation period (Ansible routes no roles)
RENAMED = dict((spec.renamed_from, spec.name) for spec in SPECS if spec.renamed_from)


def variable_pattern(spec):
    """The regular expression of ``spec``'s variable names: its prefix, less the longer prefixes of
    other roles (gds_rdma_ is not gds_rdma_bench_)."""
    longer = sorted(other.prefix[len(spec.prefix):] for other in SPECS
                    if other.prefix != spec.prefix and other.prefix.startswith(spec.prefix))
    return "^" + re.escape(spec.prefix) + ("(?!%s)" % "|".join(map(re.escape, longer)) if longer else "")


# role -> (pattern of its variable names, its area's validate_vars): what a spec cannot say,
# checked by the role's `validate` entry point and validate.yml's play (filter gds_validate)
ROLE_VARIABLES = dict((area.ROLE_SPEC.name, (variable_pattern(area.ROLE_SPEC), area.validate_vars))
                      for area in AREAS if hasattr(area, "validate_vars"))
