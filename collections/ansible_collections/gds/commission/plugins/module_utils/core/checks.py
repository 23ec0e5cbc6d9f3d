# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report checks: the one shape every role's verdicts take.

A check is ``{name, verdict, expected, actual, detail?}``; ``name`` starts with its area
(``acs: ``, ``iommu: ``, ``driver: ``, ``raid: ``, ``cufile: ``, ``bench: ``). Roles record
their list as the host fact ``gds_<role>_checks``; the report collects those.

Unknown is never PASS: ``check()`` turns a PASS whose ``actual`` or declared ``inputs`` hold an
unknown (None, a missing member, ``unknown``, NaN, infinity, a negative figure) into SKIP, or
WARN where some of them are known, and says why in ``detail``. Every check passes through it.
"""
from __future__ import annotations

import os
import re

from ansible_collections.gds.commission.plugins.module_utils.core.numbers import TOO_LARGE, figure_fault, is_figure

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


# Words that stand for no value: what a builder writes for a figure it could not read, and what
# C's printf and Python write for NaN and infinity.
UNKNOWN_WORDS = ("unknown", "nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")


def unknown_why(value):
    """Why ``value`` is no known figure, or None when it is one.

    Unknown: None (nothing read, a missing member), a word of UNKNOWN_WORDS, a number that is
    NaN, infinite, too large for a float or negative (what a check judges is a count, a size, a
    rate, a time or an index; the kernel writes -1 for "unknown"), and a dict or list with such
    a member. Booleans and other text are known."""
    if value is None:
        return "missing"
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        fault = figure_fault(value)
        if fault == TOO_LARGE:
            return "an integer of %d bits %s" % (value.bit_length(), fault)
        if fault:
            return "%r %s" % (value, fault)
        return "%r is negative" % value if value < 0 else None
    if isinstance(value, str):
        return "%r" % value if value.strip().lower() in UNKNOWN_WORDS else None
    if isinstance(value, dict):
        members = value.items()
    elif isinstance(value, (list, tuple, set, frozenset)):
        members = enumerate(value)
    else:
        return None
    whys = ["%s %s" % (key, why) for key, why in ((k, unknown_why(v)) for k, v in members) if why]
    return "{%s}" % ", ".join(whys[:5] + (["..."] if len(whys) > 5 else [])) if whys else None


def refuse_unknown(verdict, actual, inputs=None):
    """(verdict, why) under the rule "unknown is never PASS": a PASS whose ``actual`` or any of
    ``inputs`` ({name: value}, what the verdict was judged from) is unknown (unknown_why)
    becomes SKIP when nothing of it is known, else WARN; ``why`` names each unknown. Other
    verdicts, and a PASS with everything known, come back as they are (``why`` None)."""
    if verdict != "PASS":
        return verdict, None
    given = [("actual", actual)] + sorted((inputs or {}).items(), key=lambda item: str(item[0]))
    unknown = [(key, unknown_why(value)) for key, value in given]
    unknown = [(key, why) for key, why in unknown if why]
    if not unknown:
        return verdict, None
    verdict = "SKIP" if len(unknown) == len(given) else "WARN"
    return verdict, "not PASS, unknown: %s" % "; ".join("%s %s" % item for item in unknown)


def check(name, verdict, expected, actual, detail=None, inputs=None, **extra):
    """One check record; ``detail`` is left out when empty, as is each of ``extra`` (``bdf`` of a
    link check, ``low``/``high``/``unit``/``reference`` of a threshold) that is None.

    ``inputs`` ({name: value}): the figures and facts the verdict was judged from, where
    ``actual`` is only text made of them. A PASS with an unknown among them or in ``actual``
    is no PASS (refuse_unknown); ``inputs`` is not part of the record."""
    if verdict not in VERDICTS:
        raise ValueError("check %r: verdict %r is not one of %s" % (name, verdict, ", ".join(VERDICTS)))
    if inputs is not None and not isinstance(inputs, dict):
        raise ValueError("check %r: inputs must be a dict of name: value, got %r" % (name, inputs))
    verdict, why = refuse_unknown(verdict, actual, inputs)
    if why:
        detail = "%s; %s" % (detail, why) if detail else why
    out = {"name": name, "verdict": verdict, "expected": expected, "actual": actual}
    if detail:
        out["detail"] = detail
    out.update((key, value) for key, value in extra.items() if value is not None)
    return out


def fold_skips(checks, least=3):
    """``checks`` with each family of SKIPs that share their area and reason (``detail``, else
    ``actual``) folded into one check at the place of its first: ``<common words of the names>
    (N checks)``, the reason kept, the folded names in ``covers``. A run that could not measure
    one thing 112 times says so once: in the report, JUnit and the first-problem column alike."""
    def key(c):
        if c.get("verdict") != "SKIP" or not isinstance(c.get("name"), str):
            return None
        return c["name"].split(":", 1)[0], str(c.get("detail") or c.get("actual"))
    families = {}
    for c in checks:
        if key(c) is not None:
            families.setdefault(key(c), []).append(c)
    out, done = [], set()
    for c in checks:
        k = key(c)
        family = families.get(k) if k is not None else None
        if not family or len(family) < least:
            out.append(c)
            continue
        if k in done:
            continue
        done.add(k)
        words = family[0]["name"].split(" ")
        for other in family[1:]:
            other_words = other["name"].split(" ")
            n = 0
            while n < min(len(words), len(other_words)) and words[n] == other_words[n]:
                n += 1
            words = words[:n]
        prefix = " ".join(words) or k[0] + ":"
        out.append(check("%s (%d checks)" % (prefix, len(family)), "SKIP", family[0].get("expected"),
                         "%d skipped" % len(family), k[1], covers=[f["name"] for f in family]))
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


def _listed(facts, key):
    """``facts[key]`` when it is a list, else None (missing or no list: unknown)."""
    value = facts.get(key) if isinstance(facts, dict) else None
    return value if isinstance(value, list) else None


def topology_checks(topology, expect=None, profile=None):
    """``topology: ...`` checks: the expected counts, every affinity group with a local drive, and
    whether a platform profile (inventory/profiles, through the host's platform group) applied.
    A list the facts lack is an unknown count: it never equals an expected one."""
    error = expect_error(expect)
    if error:
        raise ValueError(error)
    lists = {key: _listed(topology, key) for key in ("gpus", "nvme", "nics", "groups")}
    nvme = lists["nvme"] if all(isinstance(d, dict) for d in lists["nvme"] or []) else None
    found = {"gpus": lists["gpus"], "data_drives": None if nvme is None else [d for d in nvme if not d.get("system")],
             "nics": lists["nics"], "groups": lists["groups"]}
    found = {key: None if value is None else len(value) for key, value in found.items()}
    checks = [check("topology: " + key, "PASS" if found[key] == want else "FAIL", want, found[key],
                    None if found[key] is not None else "unknown: the gds_topology facts have no %s list"
                    % ("nvme" if key == "data_drives" else key))
              for key, want in (expect or {}).items()]
    groups = [g if isinstance(g, dict) else {} for g in lists["groups"] or []]
    ungrouped = [g.get("id") for g in groups if isinstance(g.get("nvme"), list) and not g["nvme"]]
    drive_lists = [g.get("nvme") if isinstance(g.get("nvme"), list) else None for g in groups]
    checks.append(check("topology: every group has a local drive", "WARN" if ungrouped else "PASS", 0,
                        None if lists["groups"] is None else len(ungrouped),
                        "groups without a drive: %s" % ungrouped if ungrouped else None,
                        inputs={"groups' drive lists": drive_lists}))
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
    result = result if isinstance(result, dict) else {}
    platform = platform or {}
    bridges = result.get("bridges")
    with_cap = [b if isinstance(b, dict) else {} for b in bridges if not isinstance(b, dict) or b.get("acs_offset") is not None] \
        if isinstance(bridges, list) else []
    side = "before" if check_mode else "after"
    # ACS Control as the module read it ("0x0000"); anything else it could not read is unknown
    control = [(b.get("bdf"), b.get(side) if isinstance(b.get(side), str) and b.get(side).startswith("0x") else None)
               for b in with_cap]
    on = [bdf for bdf, value in control if value != "0x0000"]
    inputs = {"bridges": None if bridges is not None and not isinstance(bridges, list) else len(with_cap),
              "ACS Control": [value for dummy, value in control]}
    count = len(with_cap)
    if managed_by:
        state = "disabled"
    checks = []
    if count == 0:
        checks.append(check("acs: GPU/NVMe/NIC bridges", "SKIP", "bridges with ACS", 0,
                            "no bridge with an ACS capability above a GPU, data drive or NIC"
                            if inputs["bridges"] is not None else "unknown: the module returned no list of bridges"))
    elif state == "disabled":
        detail = ("ACS still on: " + ", ".join(map(str, on))) if on else "%d bridges with ACS Control 0x0000" % count
        if managed_by:
            detail += " (managed by nvidia-acs-disable %s)" % managed_by
        checks.append(check("acs: disabled on GPU/NVMe/NIC bridges", "FAIL" if on else "PASS", 0, len(on), detail,
                            inputs=inputs))
    elif state == "enabled":
        off = [bdf for bdf, value in control if value == "0x0000"]
        checks.append(check("acs: enabled on GPU/NVMe/NIC bridges", "FAIL" if off else "PASS", count, len(on),
                            ("ACS off: " + ", ".join(map(str, off))) if off else "kernel default ACS bits set",
                            inputs=inputs))
    else:
        checks.append(check("acs: state of GPU/NVMe/NIC bridges", "WARN" if on else "PASS", 0, len(on),
                            ("ACS on (query only): " + ", ".join(map(str, on))) if on else "%d bridges with ACS off" % count,
                            inputs=inputs))
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
    cmdline = platform.get("acs_cmdline")
    lists = cmdline.get("device_lists") if isinstance(cmdline, dict) else None
    judged = persist == "cmdline" and count > 1
    lists_broken = persist in ("cmdline", "both") and count > 1 and lists is False
    detail = "%d bridges" % count
    if lists_broken:
        detail = ("kernel %s parses only the first device of a pci=%s= list (6.11 to 6.13, fixed in 6.14)"
                  % ((platform.get("kernel") or {}).get("release"), cmdline_param))
        if persist == "both":
            detail += "; the unit clears the others"
    return check(name, "WARN" if lists_broken and persist == "cmdline" else "PASS", "persistent",
                 " + ".join(how), detail,
                 # with the command line alone, whether the kernel reads a whole list decides it
                 inputs={"the kernel parses pci= device lists": lists if isinstance(lists, bool) else None}
                 if judged else None)


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


P2PDMA_DWORDS = {"RMForceStaticBar1": "1", "RmForceDisableIomapWC": "1"}
MULTIPATH_OFF = ("N", "n", "0")


def _x86(platform):
    return (platform.get("arch") or "x86_64") != "aarch64"


def _member(facts, key):
    """``facts[key]`` when it is a dict, else {} (every fact in it then unknown)."""
    value = facts.get(key) if isinstance(facts, dict) else None
    return value if isinstance(value, dict) else {}


def _dwords_ok(platform):
    registry = _member(_member(platform, "nvidia_driver"), "registry")
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
    drv = _member(platform, "nvidia_driver")
    reboot_note = "" if reboot_ok else " (gds_reboot_ok is false)"
    checks = []
    if drv.get("loaded"):
        flavour = " open" if drv.get("open") else " proprietary" if drv.get("open") is False else ""
        checks.append(check("driver: NVIDIA kernel module", "PASS", "loaded", "%s%s" % (drv.get("version") or "loaded", flavour),
                            drv.get("banner"), inputs={"loaded": drv.get("loaded")}))
    else:
        checks.append(check("driver: NVIDIA kernel module", "FAIL" if gpus else "SKIP", "loaded", "not loaded",
                            "no /proc/driver/nvidia/version" + ("" if gpus else " (no GPU on this node)")))
    checks.append(check("driver: GDS mode", "WARN" if mode == "compat" else "PASS", mode, mode, MODE_DETAIL[mode]))
    if mode == "nvfs":
        fs = _member(platform, "nvidia_fs")
        checks.append(check("driver: nvidia-fs loaded", "PASS" if fs.get("loaded") and fs.get("proc_version") else "FAIL",
                            "loaded, /proc/driver/nvidia-fs/version",
                            fs.get("version") or ("loaded" if fs.get("loaded") else "not loaded"),
                            None if fs.get("proc_version") else "no /proc/driver/nvidia-fs/version",
                            inputs={"loaded": fs.get("loaded"), "proc_version": fs.get("proc_version")}))
        if rw_stats:
            on = fs.get("rw_stats_enabled")
            checks.append(check("driver: nvidia-fs IO statistics", "PASS" if on else "WARN", True, on,
                                "rw_stats_enabled=1: the benchmark can prove the GDS path" if on
                                else "rw_stats_enabled is off: nvidia-fs counters stay at 0"))
    elif mode == "p2pdma":
        p2p = _member(platform, "p2pdma")
        checks.append(check("driver: P2PDMA support", "PASS" if p2p.get("supported") else "FAIL",
                            "kernel 6.2+ or p2pdma_pgmap_ops, open kernel module",
                            "%s, %s" % (_member(platform, "kernel").get("release") or "?",
                                        "open" if drv.get("open") else "proprietary"),
                            inputs={"supported": p2p.get("supported")}))
        if _x86(platform):
            ok = _dwords_ok(platform)
            judged = {key: _member(drv, "registry").get(key) for key in P2PDMA_DWORDS}
            shown = drv.get("registry_dwords")
            checks.append(check("driver: NVreg_RegistryDwords", "PASS" if ok else "WARN",
                                "".join("%s=%s;" % item for item in P2PDMA_DWORDS.items()),
                                shown if shown is not None else "".join("%s=%s;" % item for item in judged.items()),
                                None if ok else "gds-p2pdma.conf applies at the next load of the nvidia module" + reboot_note,
                                inputs=judged))
        multipath = platform.get("nvme_multipath")
        ok = multipath in MULTIPATH_OFF
        checks.append(check("driver: nvme_core multipath", "PASS" if ok else "WARN", "N", multipath,
                            None if ok else "gds-p2pdma.conf applies at the next boot" + reboot_note))
    checks.append(udev_check(_member(platform, "udev")))
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
    device = ":".join(map(str, devno)) if isinstance(devno, (list, tuple)) else str(devno)
    if not isinstance(record, str):
        return check(name, "SKIP", "present", "unknown", "the udev record of block device %s is unknown: %r"
                     % (device, record))
    if os.path.exists(record):
        return check(name, "PASS", "present", record, inputs={"block device": devno})
    return check(name, "FAIL", "present", "missing",
                 "%s is missing: cuFile cannot register files on block device %s and fails or falls "
                 "back to compat mode. %s" % (record, device, udev_remedy(record)))


def udev_check(udev):
    """``driver: udev data for data drives``: cuFile looks the block device behind a file up in the
    udev database (/run/udev/data/b<major>:<minor>) and cannot register the file without it. The
    remedy belongs to udevd (a change event makes it write the record); this check only says so."""
    udev = udev if isinstance(udev, dict) else {}
    devices = udev.get("devices") or []
    missing = udev.get("missing")
    name = "driver: udev data for data drives"
    if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
        return check(name, "SKIP", "the data drives", "unknown", "the gds_platform facts list no data drives: %r"
                     % (devices,))
    if not devices:
        return check(name, "SKIP", 0, 0, "no data drive")
    missing = missing if isinstance(missing, list) else None
    present = None if missing is None else len(devices) - len(missing)
    if udev.get("readable") and not missing:
        return check(name, "PASS", len(devices), present, inputs={"readable": udev.get("readable")})
    missing = missing or []
    path = udev.get("path") or "/run/udev"
    if not udev.get("readable"):
        detail = ("%s/data is missing or unreadable: cuFile cannot register files on the data drives and "
                  "fails or falls back to compat mode. Check that systemd-udevd runs and, in a container, "
                  "that the host's /run/udev is mounted into it (read-only is enough)" % path)
    else:
        numbers = {d.get("name"): d.get("dev") for d in devices}
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
