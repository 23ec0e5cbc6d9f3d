# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hardware health verdicts: PCIe link training, AER error counters, the link baseline.

Everything here is read-only towards the hardware. The link facts come from the one PCI model
(``hw/affinity.pcie_links``); the AER counters are read by ``hw/pci.aer_counters``. The only
file written is the link baseline (``link_baseline``), and never in check mode.
"""
from __future__ import annotations

import json
import os

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, backup_copy, read_bounded, write_atomic
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import figure
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import (
    AER_FILE_NAMES, aer_counters, bdf_key, gen_of_speed, speed_gts, speed_of_gen,
)

__all__ = ["speed_gts", "gen_of_speed", "speed_of_gen", "link_checks", "read_aer", "aer_checks",
           "link_state_text", "link_baseline", "BaselineError"]

PORT_ROLES = {"root_port": "root port", "downstream": "switch downstream port",
              "upstream": "switch upstream port"}
KIND_ROLES = {"gpu": "GPU", "nvme": "NVMe controller", "nic": "NIC", "disk": "disk controller"}
AER_FAIL = ("fatal", "nonfatal", "rootport_fatal", "rootport_nonfatal")
AER_WARN = ("correctable", "rootport_correctable")


# --------------------------------------------------------------------------------------------
# Links
# --------------------------------------------------------------------------------------------
def _role(link):
    """What a link entry is, in words: "GPU", "switch upstream port", "root port" ..."""
    if link is None:
        return "port"
    if link.get("kind") == "bridge":
        if "port" not in link and "upstream" in link and link["upstream"] is None:
            return "root port"
        return PORT_ROLES.get(link.get("port"), "bridge")
    return KIND_ROLES.get(link.get("kind"), link.get("kind") or "device")


def _width(value):
    return "x%d" % value if isinstance(value, int) else "x?"


def _speed(value):
    return "%.1f GT/s" % value if isinstance(value, (int, float)) else "? GT/s"


def _state(width, speed):
    return "%s %s" % (_width(width), _speed(speed))


def _partner(link, by_bdf):
    """The other end of a link entry; entries without ``partner`` (built by hand) fall back on the
    device below a port (a GPU entry whose ``upstream`` it is), else ``upstream``."""
    if "partner" in link:
        return by_bdf.get(link["partner"])
    below = [other for other in by_bdf.values() if other.get("upstream") == link["bdf"]]
    if link.get("kind") == "bridge" and below:
        return below[0]
    return by_bdf.get(link.get("upstream"))


def _gpu_side(link, by_bdf):
    """The GPU at either end of this link (its BDF), or None: a GPU trains its link speed down
    when idle, so both ends of its link show the idle speed."""
    if link.get("kind") == "gpu":
        return link["bdf"]
    partner = _partner(link, by_bdf)
    if partner is not None and partner.get("kind") == "gpu":
        return partner["bdf"]
    return None


def _slow_end(link, by_bdf, what):
    """Which end is slow, e.g. "switch upstream port 0000:01:00.0 x8 of x16 (the other end,
    root port 0000:00:01.1, supports x16 16.0 GT/s)"."""
    partner = _partner(link, by_bdf)
    if what == "width":
        text = "%s %s %s of %s" % (_role(link), link["bdf"], _width(link.get("current_width")),
                                   _width(link.get("expected_width")))
    else:
        text = "%s %s %s of %s" % (_role(link), link["bdf"], _speed(link.get("current_speed_gts")),
                                   _speed(link.get("expected_speed_gts")))
    if partner is not None:
        text += " (the other end, %s %s, supports %s)" % (
            _role(partner), partner["bdf"], _state(partner.get("max_width"), partner.get("max_speed_gts")))
    return text


def link_checks(pcie_links, gpu_load=None):
    """``pcie: link <bdf>`` for every link entry.

    FAIL when the link runs below the best both ends support (the detail names the slow end),
    WARN when a value could not be read (the detail names the file). A GPU's link (at the GPU
    and at the port above it) is judged on width always and on speed only with ``gpu_load``
    ({bdf: {max_gen_seen, max_width_seen, max_gen, max_width, samples}}, NVML's maxima seen
    while the benchmark ran); without it a lower speed is PASS, "idle: speed judged under load
    only".
    """
    gpu_load = gpu_load if isinstance(gpu_load, dict) else {}
    by_bdf = {link["bdf"]: link for link in pcie_links or []}
    checks = []
    for link in sorted(pcie_links or [], key=lambda entry: bdf_key(entry["bdf"])):
        name = "pcie: link %s" % link["bdf"]
        expected = _state(link.get("expected_width"), link.get("expected_speed_gts"))
        actual = _state(link.get("current_width"), link.get("current_speed_gts"))
        gpu = _gpu_side(link, by_bdf)
        slow, notes = [], []
        # what the verdict is judged from: the width always, the speed as below
        judged = {"current_width": link.get("current_width"), "expected_width": link.get("expected_width")}
        width_low = _below(link.get("current_width"), link.get("expected_width"))
        if width_low is True:
            slow.append(_slow_end(link, by_bdf, "width"))
        speed_low = _below(link.get("current_speed_gts"), link.get("expected_speed_gts"))
        load = gpu_load.get(gpu) if gpu else None
        if gpu in gpu_load and not isinstance(load, dict):
            load = {"unreadable": load}  # sampled, but nothing readable: judged as unknown
        if gpu and load:
            seen = _int(load.get("max_gen_seen"))
            want = gen_of_speed(figure(link.get("expected_speed_gts"))) or _int(load.get("max_gen"))
            speed_low = None if seen is None or want is None else seen < want
            judged.update(max_gen_seen=seen, expected_gen=want)
            actual = "%s Gen%s under load" % (_width(link.get("current_width")), seen if seen is not None else "?")
            notes.append("under load: Gen%s of Gen%s seen in %s samples (NVML, GPU %s)"
                         % (seen, want, load.get("samples"), gpu))
            if speed_low:
                slow.append("%s %s Gen%s of Gen%s under load" % (_role(link), link["bdf"], seen, want))
        elif gpu and speed_low is not None:
            # say which it was: without load data the speed is reported, never judged
            notes.append("idle: speed judged under load only (now %s of %s)"
                         % (_speed(link.get("current_speed_gts")), _speed(link.get("expected_speed_gts"))))
            speed_low = False
        elif speed_low:
            slow.append(_slow_end(link, by_bdf, "speed"))
        if not gpu:
            judged.update(current_speed_gts=link.get("current_speed_gts"),
                          expected_speed_gts=link.get("expected_speed_gts"))
        if link.get("problem"):
            notes.append(link["problem"])
        if slow:
            verdict = "FAIL"
        elif width_low is None or speed_low is None or link.get("problem"):
            verdict = "WARN"
            notes.insert(0, "unknown: link state not fully readable")
        else:
            verdict = "PASS"
        checks.append(check(name, verdict, expected, actual, "; ".join(slow + notes), bdf=link["bdf"],
                            inputs=judged))
    return checks


def _below(current, expected):
    current, expected = figure(current), figure(expected)
    if current is None or expected is None:
        return None
    return current < expected


def _int(value):
    """A counter or generation as read: a whole number >= 0, else None (unknown)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# --------------------------------------------------------------------------------------------
# AER
# --------------------------------------------------------------------------------------------
def read_aer(sysfs_root, bdfs):
    """{bdf: {correctable, nonfatal, fatal, rootport_correctable, rootport_nonfatal,
    rootport_fatal}} (ints, None where the file is missing or unreadable)."""
    return {bdf: aer_counters(sysfs_root, bdf) for bdf in bdfs}


def aer_checks(before, after, correctable_limit):
    """``pcie: aer <bdf>``: FAIL for any fatal or non-fatal error counted between ``before`` and
    ``after`` (read_aer results), WARN when correctable errors grew by more than
    ``correctable_limit``, SKIP when the function has no counters. A counter that went down was
    reset (the device was removed and added again): all it shows now counts."""
    limit = correctable_limit if isinstance(correctable_limit, int) and correctable_limit >= 0 else 0
    before = before if isinstance(before, dict) else {}
    after = after if isinstance(after, dict) else {}
    checks = []
    for bdf in sorted(set(before) | set(after), key=bdf_key):
        old, new = before.get(bdf), after.get(bdf)
        old, new = (old if isinstance(old, dict) else {}), (new if isinstance(new, dict) else {})
        deltas, read = {}, {}
        for key in AER_FILE_NAMES:
            if _int(old.get(key)) is not None and _int(new.get(key)) is not None:
                deltas[key] = new[key] - old[key] if new[key] >= old[key] else new[key]
            # a counter the device has (read on either side) but not read on both is unknown
            if old.get(key) is not None or new.get(key) is not None:
                read[key] = deltas.get(key)
        name = "pcie: aer %s" % bdf
        expected = "no fatal or non-fatal errors, correctable <= %d" % limit
        if not deltas:
            checks.append(check(name, "SKIP", expected, "unknown",
                                "unknown: no AER counters for %s before and after (no %s: no AER "
                                "capability or a kernel before 5.7)" % (bdf, AER_FILE_NAMES["fatal"])))
            continue
        actual = ", ".join("%s +%d" % (key, deltas[key]) for key in AER_FILE_NAMES if key in deltas)
        failed = ["%s %s +%d" % (bdf, AER_FILE_NAMES[key], deltas[key]) for key in AER_FAIL if deltas.get(key, 0) > 0]
        warned = ["%s %s +%d (limit %d)" % (bdf, AER_FILE_NAMES[key], deltas[key], limit)
                  for key in AER_WARN if deltas.get(key, 0) > limit]
        verdict = "FAIL" if failed else "WARN" if warned else "PASS"
        checks.append(check(name, verdict, expected, actual, "; ".join(failed + warned), inputs=read))
    return checks


# --------------------------------------------------------------------------------------------
# Link baseline (drift)
# --------------------------------------------------------------------------------------------
class BaselineError(Exception):
    """The baseline file cannot be written; the message names it."""


def link_state_text(link, partner_kind=None):
    """A link's state for the baseline: "x16 16.0 GT/s". A GPU's link speed follows its load,
    so on both ends of a GPU's link it is the width and the best speed both ends support:
    "x16 up to 16.0 GT/s"."""
    if "gpu" in (link.get("kind"), partner_kind):
        return "%s up to %s" % (_width(link.get("current_width")), _speed(link.get("expected_speed_gts")))
    return _state(link.get("current_width"), link.get("current_speed_gts"))


def link_states(pcie_links):
    """{bdf: state text} of every link entry."""
    kinds = {link["bdf"]: link.get("kind") for link in pcie_links or []}
    return {link["bdf"]: link_state_text(link, kinds.get(link.get("partner"))) for link in pcie_links or []}


def _read_baseline(path):
    """(states, problem): the baseline's {bdf: state}, or None and why it is unusable."""
    try:
        doc = json.loads(read_bounded(path, follow=False).decode("utf-8", "replace"))
    except UnreadableFile as exc:
        return None, str(exc)
    except ValueError as exc:
        return None, "%s is not JSON: %s" % (path, exc)
    links = doc.get("links") if isinstance(doc, dict) else None
    if not isinstance(links, dict) or not all(isinstance(v, str) for v in links.values()):
        return None, "%s has no links mapping of BDF to state" % path
    return links, None


def link_baseline(path, pcie_links, check_mode):
    """Record or compare the link baseline at ``path``.

    Not in check mode (commissioning): write the current states when they differ from the file
    (atomically, the old file kept as ``<path>.<time>~``). In check mode (drift): write nothing
    and return one drift item ``{setting: "pcie link <bdf>", expected, actual}`` per link whose
    state differs from the baseline ("absent" for a link that appeared or vanished).
    Returns {changed, drift, path, backup_file, diff}; ``changed`` is what a write did or would do.
    """
    states = link_states(pcie_links)
    old, problem = (None, None)
    if os.path.lexists(path):
        old, problem = _read_baseline(path)
    drift = []
    if old is None:
        drift.append({"setting": "pcie link baseline %s" % path, "expected": "a baseline of %d links" % len(states),
                      "actual": problem or "missing"})
    else:
        for bdf in sorted(set(old) | set(states), key=bdf_key):
            if old.get(bdf) != states.get(bdf):
                drift.append({"setting": "pcie link %s" % bdf, "expected": old.get(bdf, "absent"),
                              "actual": states.get(bdf, "absent")})
    result = {"changed": bool(drift), "drift": drift if check_mode else [], "path": path,
              "backup_file": None}
    text = json.dumps({"links": states}, indent=1, sort_keys=True) + "\n"
    if drift:
        result["diff"] = {"before_header": path, "after_header": path,
                          "before": json.dumps({"links": old}, indent=1, sort_keys=True) + "\n" if old else "",
                          "after": text}
    if drift and not check_mode:
        try:
            if os.path.isfile(path):
                result["backup_file"] = backup_copy(path)
            write_atomic(path, text)
        except OSError as exc:
            raise BaselineError("cannot write the link baseline %s: %s" % (path, exc.strerror or exc))
    if result["backup_file"] is None:
        del result["backup_file"]
    return result
