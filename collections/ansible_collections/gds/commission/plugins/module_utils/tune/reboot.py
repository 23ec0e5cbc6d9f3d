# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gds_reboot role's interface: whether and how the tune playbook reboots a node whose change needs it."""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.core.spec import RoleSpec, Var


# The role gds_reboot: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_reboot', 'gds_reboot_',
    short_description='Reboot the nodes whose tuning needs it (only with gds_reboot_ok) and verify them again',
    description=('Collects the gds_<role>_reboot_required flags into gds_reboot_required; reboots only with '
                 'gds_reboot_ok true, never a simulated node (gds_live false), never in check mode.',
                 'After a reboot, reads the platform facts again (gds_facts, entry point platform) and runs the '
                 'verify entry points of gds_iommu, gds_pcie_acs and gds_driver; sets gds_reboot_done.',),
    variables=[
        Var('gds_reboot_ok', 'bool',
            'Let the tune playbook reboot a node whose IOMMU or driver settings wait for a reboot.',
            False),
        Var('gds_reboot_timeout', 'int',
            'Seconds to wait for a node to come back from the reboot.',
            1800),
    ],
    shared=('gds_live',),
    entry_points={
        'validate': "main",
    },
)
