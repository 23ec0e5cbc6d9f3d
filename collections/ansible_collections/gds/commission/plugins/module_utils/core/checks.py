# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report checks: the one shape every role's verdicts take.

A check is ``{name, verdict, expected, actual, detail?}``; ``name`` starts with its area
(``acs: ``, ``iommu: ``, ``driver: ``, ``raid: ``, ``cufile: ``, ``bench: ``). Roles record
their list as the host fact ``gds_<role>_checks``; the report collects those.
"""
from __future__ import annotations

import math
import os
import re

# The one list of verdicts and the one order of them, best to worst: a host's verdict, an area's
# (metrics), the fleet page's order and the report's validation all come from here.
# UNREACHABLE is the report's own, for a host it could not reach.
SEVERITY = ("SKIP", "PASS", "WARN", "FAIL", "ERROR", "UNREACHABLE")
VERDICTS = ("PASS", "WARN", "FAIL", "SKIP", "ERROR", "UNREACHABLE")
# the verdicts that fail a host, worst first
FAILING = ("UNREACHABLE", "ERROR", "FAIL")


def rank(verdict):
    """A verdict's place in SEVERITY (higher is worse); what is no verdict ranks as ERROR."""
    return SEVERITY.index(verdict) if verdict in SEVERITY else SEVERITY.index("ERROR")


def worst(verdicts, default="SKIP"):
    """The worst of ``verdicts`` (``default`` when there is none)."""
    return max(verdicts, key=rank, default=default)


def host_verdict(verdicts):
    """A host's verdict from its checks: the worst failing one (UNREACHABLE, ERROR, FAIL), else
    PASS (WARN and SKIP are shown but do not fail acceptance)."""
    present = set(verdicts)
    return next((verdict for verdict in FAILING if verdict in present), "PASS")


def check(name, verdict, expected, actual, detail=None, **extra):
    """One check record; ``detail`` is left out when empty, as is each of ``extra`` (``bdf`` of a
    link check, ``low``/``high``/``unit``/``reference`` of a threshold) that is None."""
    if verdict not in VERDICTS:
        raise ValueError("check %r: verdict %r is not one of %s" % (name, verdict, ", ".join(VERDICTS)))
    out = {"name": name, "verdict": verdict, "expected": expected, "actual": actual}
    if detail:
        out["detail"] = detail
    out.update((key, value) for key, value in extra.items() if value is not None)
    return out


def profile_thresholds(given, defaults, kind, error, check_value):
    """A profile's thresholds over ``defaults``: ``given`` must be a dict of known keys, each
    value passing ``check_value(key, value)`` (which returns why not, or None). ``error`` (an
    exception class) names the ``kind`` of threshold, the key and the value at fault."""
    given = given or {}
    if not isinstance(given, dict):
        raise error("%s thresholds must be a dict, got %r" % (kind, given))
    out = dict(defaults)
    for key, value in given.items():
        if key not in defaults:
            raise error("%s threshold %r is unknown (known: %s)" % (kind, key, ", ".join(sorted(defaults))))
        why = check_value(key, value)
        if why:
            raise error("%s threshold %s must be %s; got %r" % (kind, key, why, value))
        out[key] = value
    return out


def is_figure(value):
    """A number to compare or show: not a bool, and a finite float can hold it (NaN, infinity,
    10**400 and text are no figures)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def gb_text(value):
    """Bytes as a check's text or a chart's label says them: GB from 10 MB up, else MB; "unknown"
    for what is no figure."""
    if not is_figure(value):
        return "unknown"
    return "%.2f GB" % (value / 1e9) if value >= 1e7 else "%.1f MB" % (value / 1e6)


def non_negative_number(value):
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value >= 0


# --------------------------------------------------------------------------------------------
# Verdicts per area. Each function takes the facts and results it judges as plain data (the
# gds_topology / gds_platform facts, a module's return value, the role's settings) and returns
# the list of checks the role records; the roles call them through the gds_checks filters.
# --------------------------------------------------------------------------------------------
TOPOLOGY_COUNTS = ("gpus", "data_drives", "nics", "groups")


def expect_error(expect):
    """Why ``gds_facts_expect`` is not {count name: non-negative int}; None when it is fine."""
    if expect is None:
        return None
    if not isinstance(expect, dict):
        return "gds_facts_expect must be a dict such as {gpus: 8, data_drives: 8}, got %r" % (expect,)
    for key, want in expect.items():
        if key not in TOPOLOGY_COUNTS:
            return "gds_facts_expect: unknown key %r (known: %s)" % (key, ", ".join(TOPOLOGY_COUNTS))
        if isinstance(want, bool) or not isinstance(want, int) or want < 0:
            return "gds_facts_expect.%s must be a whole number >= 0, got %r" % (key, want)
    return None


def topology_checks(topology, expect=None, profile=None):
    """``topology: ...`` checks: the expected counts, every affinity group with a local drive, and
    whether a platform profile (inventory/profiles, through the host's platform group) applied."""
    error = expect_error(expect)
    if error:
        raise ValueError(error)
    found = {"gpus": len(topology.get("gpus") or []),
             "data_drives": len([d for d in topology.get("nvme") or [] if not d.get("system")]),
             "nics": len(topology.get("nics") or []),
             "groups": len(topology.get("groups") or [])}
    checks = [check("topology: " + key, "PASS" if found[key] == want else "FAIL", want, found[key])
              for key, want in (expect or {}).items()]
    ungrouped = [g["id"] for g in topology.get("groups") or [] if not g.get("nvme")]
    checks.append(check("topology: every group has a local drive", "WARN" if ungrouped else "PASS", 0,
                        len(ungrouped), "groups without a drive: %s" % ungrouped if ungrouped else None))
    if profile:
        checks.append(check("topology: platform profile", "PASS", "a platform profile", profile))
    else:
        checks.append(check("topology: platform profile", "WARN", "a platform profile", None,
                            "the host is in no platform group (dgx2, dgx_a100, dgx_h100, gh200, gpu_compat, "
                            "...): no profile applied, so the roles' defaults and no benchmark thresholds "
                            "of the platform are used"))
    return checks


def acs_checks(result, state, persist="unit", cmdline_param="config_acs", managed_by=None, live=True,
               platform=None, check_mode=False):
    """``acs: ...`` checks from the pcie_acs module's result.

    ``state`` is gds_pcie_acs_state; ``managed_by`` the version of DGX OS's nvidia-acs-disable when
    that package manages ACS (the role then only verifies that ACS is off). In check mode the
    checks describe the bridges as they are (``before``), else as the module left them (``after``).
    """
    result = result or {}
    platform = platform or {}
    with_cap = [b for b in result.get("bridges") or [] if b.get("acs_offset") is not None]
    side = "before" if check_mode else "after"
    on = [b["bdf"] for b in with_cap if b.get(side) != "0x0000"]
    count = len(with_cap)
    if managed_by:
        state = "disabled"
    checks = []
    if count == 0:
        checks.append(check("acs: GPU/NVMe/NIC bridges", "SKIP", "bridges with ACS", 0,
                            "no bridge with an ACS capability above a GPU, data drive or NIC"))
    elif state == "disabled":
        detail = ("ACS still on: " + ", ".join(on)) if on else "%d bridges with ACS Control 0x0000" % count
        if managed_by:
            detail += " (managed by nvidia-acs-disable %s)" % managed_by
        checks.append(check("acs: disabled on GPU/NVMe/NIC bridges", "FAIL" if on else "PASS", 0, len(on), detail))
    elif state == "enabled":
        off = [b["bdf"] for b in with_cap if b["bdf"] not in on]
        checks.append(check("acs: enabled on GPU/NVMe/NIC bridges", "FAIL" if off else "PASS", count, len(on),
                            ("ACS off: " + ", ".join(off)) if off else "kernel default ACS bits set"))
    else:
        checks.append(check("acs: state of GPU/NVMe/NIC bridges", "WARN" if on else "PASS", 0, len(on),
                            ("ACS on (query only): " + ", ".join(on)) if on else "%d bridges with ACS off" % count))
    if count and state == "disabled":
        checks.append(_acs_persistence(count, persist, cmdline_param, managed_by, live, platform))
    vfio = result.get("vfio_devices") or []
    if vfio:
        checks.append(check("acs: devices bound to vfio-pci", "WARN", 0, len(vfio),
                            "changed with gds_pcie_acs_allow_with_vfio: " + ", ".join(vfio)))
    return checks


def _acs_persistence(count, persist, cmdline_param, managed_by, live, platform):
    name = "acs: kept disabled across reboots"
    if managed_by:
        return check(name, "PASS", "persistent", "nvidia-acs-disable " + managed_by,
                     "DGX OS manages ACS on this node; the role only verifies it")
    if persist == "none":
        return check(name, "WARN", "persistent", "none",
                     "gds_pcie_acs_persist is none: ACS comes back at the next boot")
    how = []
    if persist in ("unit", "both"):
        how.append("gds-acs-disable.service" + ("" if live else " (written; not enabled on a simulated node)"))
    if persist in ("cmdline", "both"):
        how.append("pci=%s in 99-gds-acs.cfg" % cmdline_param)
    # kernels 6.11 to 6.13 parse only the first device of a pci=config_acs= list
    lists_broken = persist in ("cmdline", "both") and count > 1 and \
        not (platform.get("acs_cmdline") or {}).get("device_lists", True)
    detail = "%d bridges" % count
    if lists_broken:
        detail = ("kernel %s parses only the first device of a pci=%s= list (6.11 to 6.13, fixed in 6.14)"
                  % ((platform.get("kernel") or {}).get("release"), cmdline_param))
        if persist == "both":
            detail += "; the unit clears the others"
    return check(name, "WARN" if lists_broken and persist == "cmdline" else "PASS", "persistent",
                 " + ".join(how), detail)


def iommu_checks(iommu, want, after_reboot=False, reboot_ok=False, live=True, params="", dropin="",
                 update_grub=False, update_bootloader=True):
    """``iommu: ...`` checks: the running mode (``iommu`` of the gds_platform facts) against the
    wanted one, and whether the boot configuration carries the drop-in.

    A differing mode is a WARN while it waits for a reboot, a FAIL after a reboot that did not
    apply it; ``want`` ``leave`` is a SKIP."""
    running = iommu.get("mode")
    seen = "units %s, %s groups%s, cmdline %s" % (
        ",".join(iommu.get("units") or []) or "none", iommu.get("groups"),
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


P2PDMA_DWORDS = {"RMForceStaticBar1": "1", "RmForceDisableIomapWC": "1"}
MULTIPATH_OFF = ("N", "n", "0")


def _x86(platform):
    return (platform.get("arch") or "x86_64") != "aarch64"


def _dwords_ok(platform):
    registry = platform["nvidia_driver"].get("registry") or {}
    return all(registry.get(key) == value for key, value in P2PDMA_DWORDS.items())


def driver_reboot_pending(platform, mode):
    """The P2PDMA module options the running drivers do not have yet (they apply at the next load)."""
    if mode != "p2pdma":
        return []
    pending = []
    if _x86(platform) and not _dwords_ok(platform):
        pending.append("NVreg_RegistryDwords")
    if platform.get("nvme_multipath") not in MULTIPATH_OFF:
        pending.append("nvme_core multipath=N")
    return pending


MODE_DETAIL = {"nvfs": "GPUDirect through the nvidia-fs kernel module",
               "p2pdma": "GPUDirect through the kernel P2PDMA (no nvidia-fs)",
               "compat": "cuFile uses POSIX I/O through host memory: no GPUDirect"}


def driver_checks(platform, mode, gpus=0, rw_stats=True, live=True, reboot_ok=False):
    """``driver: ...`` checks from the gds_platform facts: the NVIDIA module, the GDS mode and what
    it needs (nvidia-fs and its IO statistics, or the P2PDMA prerequisites and module options), the
    GPU peer-memory module for RDMA NICs, and the udev data cuFile needs for every data drive."""
    drv = platform["nvidia_driver"]
    reboot_note = "" if reboot_ok else " (gds_reboot_ok is false)"
    checks = []
    if drv.get("loaded"):
        flavour = " open" if drv.get("open") else " proprietary" if drv.get("open") is False else ""
        checks.append(check("driver: NVIDIA kernel module", "PASS", "loaded", (drv.get("version") or "loaded") + flavour,
                            drv.get("banner")))
    else:
        checks.append(check("driver: NVIDIA kernel module", "FAIL" if gpus else "SKIP", "loaded", "not loaded",
                            "no /proc/driver/nvidia/version" + ("" if gpus else " (no GPU on this node)")))
    checks.append(check("driver: GDS mode", "WARN" if mode == "compat" else "PASS", mode, mode, MODE_DETAIL[mode]))
    if mode == "nvfs":
        fs = platform["nvidia_fs"]
        checks.append(check("driver: nvidia-fs loaded", "PASS" if fs.get("loaded") and fs.get("proc_version") else "FAIL",
                            "loaded, /proc/driver/nvidia-fs/version",
                            fs.get("version") or ("loaded" if fs.get("loaded") else "not loaded"),
                            None if fs.get("proc_version") else "no /proc/driver/nvidia-fs/version"))
        if rw_stats:
            on = fs.get("rw_stats_enabled")
            checks.append(check("driver: nvidia-fs IO statistics", "PASS" if on else "WARN", True, on,
                                "rw_stats_enabled=1: the benchmark can prove the GDS path" if on
                                else "rw_stats_enabled is off: nvidia-fs counters stay at 0"))
    elif mode == "p2pdma":
        p2p = platform.get("p2pdma") or {}
        checks.append(check("driver: P2PDMA support", "PASS" if p2p.get("supported") else "FAIL",
                            "kernel 6.2+ or p2pdma_pgmap_ops, open kernel module",
                            "%s, %s" % ((platform.get("kernel") or {}).get("release") or "?",
                                        "open" if drv.get("open") else "proprietary")))
        if _x86(platform):
            ok = _dwords_ok(platform)
            checks.append(check("driver: NVreg_RegistryDwords", "PASS" if ok else "WARN",
                                "".join("%s=%s;" % item for item in P2PDMA_DWORDS.items()), drv.get("registry_dwords"),
                                None if ok else "gds-p2pdma.conf applies at the next load of the nvidia module" + reboot_note))
        multipath = platform.get("nvme_multipath")
        ok = multipath in MULTIPATH_OFF
        checks.append(check("driver: nvme_core multipath", "PASS" if ok else "WARN", "N", multipath,
                            None if ok else "gds-p2pdma.conf applies at the next boot" + reboot_note))
    checks.append(udev_check(platform.get("udev") or {}))
    return checks


def udev_remedy(record, device=None):
    """What to do about a missing udev record ``record`` (/run/udev/data/b<major>:<minor>): udevd
    writes it on a change event; the product never writes or deletes udev records itself."""
    target = "/dev/%s" % device if device else "the block device"
    return ("Check with `udevadm info %s`; `udevadm trigger --action=change %s` makes systemd-udevd "
            "write %s (in a container: udevd runs on the host, whose /run/udev must be mounted in)"
            % (target, target, record))


def udev_record_check(name, record, devno):
    """``bench: JOB: udev record``: the record of the block device ``devno`` (major, minor) that
    holds a benchmark's files; cuFile cannot register a file there without it."""
    if record is None:
        return None
    if os.path.exists(record):
        return check(name, "PASS", "present", record)
    return check(name, "FAIL", "present", "missing",
                 "%s is missing: cuFile cannot register files on block device %d:%d and fails or falls "
                 "back to compat mode. %s" % (record, devno[0], devno[1], udev_remedy(record)))


def udev_check(udev):
    """``driver: udev data for data drives``: cuFile looks the block device behind a file up in the
    udev database (/run/udev/data/b<major>:<minor>) and cannot register the file without it. The
    remedy belongs to udevd (a change event makes it write the record); this check only says so."""
    devices = udev.get("devices") or []
    missing = udev.get("missing") or []
    name = "driver: udev data for data drives"
    if not devices:
        return check(name, "SKIP", 0, 0, "no data drive")
    present = len(devices) - len(missing)
    if udev.get("readable") and not missing:
        return check(name, "PASS", len(devices), present)
    path = udev.get("path") or "/run/udev"
    if not udev.get("readable"):
        detail = ("%s/data is missing or unreadable: cuFile cannot register files on the data drives and "
                  "fails or falls back to compat mode. Check that systemd-udevd runs and, in a container, "
                  "that the host's /run/udev is mounted into it (read-only is enough)" % path)
    else:
        numbers = {d["name"]: d.get("dev") for d in devices}
        first = missing[0]
        record = "%s/data/b%s" % (path, numbers.get(first)) if numbers.get(first) else "its record in %s/data" % path
        detail = ("no udev entry for %s: cuFile cannot register files there and fails or falls back to "
                  "compat mode. %s"
                  % (", ".join("%s (%s)" % (m, numbers.get(m) or "no dev number") for m in missing),
                     udev_remedy(record, first)))
    return check(name, "FAIL", len(devices), present, detail)


_SAFE_PATH = re.compile(r"^(/[A-Za-z0-9._+-]+)+$")


def unit_exec_error(path):
    """Why ``path`` cannot be the program of a root systemd unit's ExecStart: it must be an
    absolute path of plain path characters (no spaces, quotes, ``;``, ``$``, ``%`` specifiers, no
    ``..``), so that the unit runs exactly that file and nothing else. None when it is fine."""
    if not isinstance(path, str) or not path:
        return "must be an absolute path to an executable, got %r" % (path,)
    if not _SAFE_PATH.match(path) or "/." in path:
        return ("%r is not an absolute path of plain characters (letters, digits, . _ + - /, no "
                "component starting with '.'): "
                "it is written into a root systemd unit, so no shell words, spaces or specifiers" % (path,))
    return None
