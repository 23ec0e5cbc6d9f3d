# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The IOMMU mode: the ``iommu: ...`` checks of the iommu role (through the gds_iommu_checks
filter), from the running mode in the gds_platform facts and the GRUB drop-in the role wrote."""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check


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
