# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The IOMMU mode: the ``iommu: ...`` checks of the gds_iommu role (through the gds_iommu_checks
filter), from the running mode in the gds_platform facts and the GRUB drop-in the role wrote."""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.spec import EntryPoint, RoleSpec, Var, on_node


def iommu_checks(iommu, want, after_reboot=False, reboot_ok=False, live=True, params="", dropin="",
                 update_grub=False, update_bootloader=True):
    """``iommu: ...`` checks: the running mode (``iommu`` of the gds_platform facts) against the
    wanted one, and whether the boot configuration carries the drop-in.

    A differing mode is a WARN while it waits for a reboot, a FAIL after a reboot that did not
    apply it; ``want`` ``leave`` is a SKIP."""
    iommu = iommu if isinstance(iommu, dict) else {}
    running = iommu.get("mode")
    seen = "units %s, %s groups%s, cmdline %s" % (
        ",".join(map(str, iommu.get("units") or [])) or "none", iommu.get("groups"),
        (" %s" % iommu["group_types"]) if iommu.get("group_types") else "", iommu.get("cmdline") or "default")
    if want == "leave":
        return [check("iommu: mode", "SKIP", "leave", running, "gds_iommu_mode is leave; " + seen)]
    if running == want:
        checks = [check("iommu: mode", "PASS", want, running, seen)]
    elif after_reboot:
        checks = [check("iommu: mode", "FAIL", want, running,
                        "still %s after the reboot (firmware setting?); %s" % (running, seen))]
    else:
        checks = [check("iommu: mode", "WARN", want, running, "applies at the next reboot%s; %s"
                        % ("" if reboot_ok else " (gds_reboot_ok is false)", seen))]
    regenerated = not live or (update_grub and update_bootloader)
    if not live:
        detail = "simulated node: drop-in written, update-grub skipped"
    elif regenerated:
        detail = "update-grub ran when the drop-in changed"
    else:
        detail = "drop-in written, but update-grub %s: regenerate the boot configuration yourself" % (
            "is not on this node" if update_bootloader else "is off")
    checks.append(check("iommu: boot configuration", "PASS" if regenerated else "WARN", params or "",
                        dropin.rsplit("/", 1)[-1], detail))
    return checks


# The role gds_iommu: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_iommu', 'gds_iommu_',
    short_description='Set the IOMMU mode GPUDirect Storage needs on the kernel command line',
    description=('Compares the IOMMU mode the node runs with (command line, /sys/class/iommu, IOMMU group types) '
                 'with the desired one and writes a /etc/default/grub.d drop-in plus update-grub when they differ.',
                 "Sets gds_iommu_reboot_required; the tune playbook's reboot step (role gds_reboot) reboots only "
                 'with gds_reboot_ok true.',
                 'Refuses off and passthrough on Grace Hopper, where NVIDIA requires the IOMMU on.',),
    variables=[
        Var('gds_iommu_mode', 'str',
            'IOMMU mode: auto (platform default: on for Grace Hopper, off on x86), off, pt, on, or leave (touch '
            'nothing).',
            'auto',
            choices=('auto', 'off', 'pt', 'on', 'leave')),
        Var('gds_iommu_update_bootloader', 'bool',
            'Regenerate the boot loader configuration (update-grub) when the drop-in changed.',
            True),
        Var('gds_iommu_grub_dropin', 'path',
            'GRUB drop-in that carries the IOMMU kernel parameters (sourced after /etc/default/grub).',
            on_node('/etc/default/grub.d/99-gds-iommu.cfg')),
    ],
    shared=('gds_reboot_ok', 'gds_root', 'gds_live'),
    entry_points={
        'verify': EntryPoint(
            'Re-record the IOMMU mode and checks after a reboot',
            variables=['gds_iommu_grub_dropin']),
        'validate': "main",
        'steps': "main",
    },
    renamed_from='iommu',
)
