# STUB: replaced by the links helper's file on merge.
# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Minimal stand-in for the PCIe link and AER checks (only what gds_devhealth calls)."""
from __future__ import annotations

import os

from ansible.module_utils.gds_checks import check
from ansible.module_utils.gds_files import read_text

GENS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def gen_of_speed(gts):
    for gen, speed in GENS.items():
        if gts is not None and abs(gts - speed) < 0.01:
            return gen
    return None


def link_checks(pcie_links, gpu_load=None):
    out = []
    for link in pcie_links:
        bdf = link["bdf"]
        load = (gpu_load or {}).get(bdf)
        if link.get("kind") == "gpu" and load:
            want = gen_of_speed(link.get("expected_speed_gts")) or load["max_gen"]
            gen_ok = load["max_gen_seen"] >= want
            width_ok = (link.get("current_width") or 0) >= (link.get("expected_width") or 0)
            out.append(check("pcie: link %s" % bdf, "PASS" if gen_ok and width_ok else "FAIL",
                             "x%s Gen%s" % (link.get("expected_width"), want),
                             "x%s Gen%s under load" % (link.get("current_width"), load["max_gen_seen"]),
                             "under load: Gen%s of Gen%s seen in %s samples" % (load["max_gen_seen"], want, load["samples"])))
    return out


def _aer_total(path, key):
    text = read_text(path)
    if text is None:
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            return int(parts[1])
    return None


def _one(path):
    text = read_text(path)
    return int(text.strip()) if text is not None and text.strip().isdigit() else None


def read_aer(sysfs_root, bdfs):
    out = {}
    for bdf in bdfs:
        dev = os.path.join(sysfs_root, "bus", "pci", "devices", bdf)
        out[bdf] = {
            "correctable": _aer_total(os.path.join(dev, "aer_dev_correctable"), "TOTAL_ERR_COR"),
            "nonfatal": _aer_total(os.path.join(dev, "aer_dev_nonfatal"), "TOTAL_ERR_NONFATAL"),
            "fatal": _aer_total(os.path.join(dev, "aer_dev_fatal"), "TOTAL_ERR_FATAL"),
            "rootport_correctable": _one(os.path.join(dev, "aer_rootport_total_err_cor")),
            "rootport_nonfatal": _one(os.path.join(dev, "aer_rootport_total_err_nonfatal")),
            "rootport_fatal": _one(os.path.join(dev, "aer_rootport_total_err_fatal")),
        }
    return out


def aer_checks(before, after, correctable_limit):
    out = []
    for bdf in sorted(after):
        deltas = {k: after[bdf][k] - before.get(bdf, {}).get(k)
                  for k in after[bdf] if after[bdf][k] is not None and before.get(bdf, {}).get(k) is not None}
        name = "pcie: aer %s" % bdf
        if not deltas:
            out.append(check(name, "SKIP", None, None, "no AER counters"))
            continue
        bad = ["%s %s +%d" % (bdf, k, v) for k, v in sorted(deltas.items()) if v > 0 and "correctable" not in k]
        cor = sum(v for k, v in deltas.items() if "correctable" in k)
        verdict = "FAIL" if bad else ("WARN" if cor > correctable_limit else "PASS")
        out.append(check(name, verdict, "no errors", ", ".join(bad) or "correctable +%d" % cor,
                         "; ".join(bad) or ("%s correctable +%d" % (bdf, cor) if cor else None)))
    return out
