# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report checks: the one shape every role's verdicts take.

A check is ``{name, verdict, expected, actual, detail?}``; ``name`` starts with its area
(``acs: ``, ``iommu: ``, ``driver: ``, ``raid: ``, ``cufile: ``, ``bench: ``). Roles record
their list as the host fact ``gds_<role>_checks``; the report collects those.
"""
from __future__ import annotations

VERDICTS = ("PASS", "WARN", "FAIL", "SKIP", "ERROR")


def check(name, verdict, expected, actual, detail=None):
    """One check record; ``detail`` is left out when empty."""
    if verdict not in VERDICTS:
        raise ValueError("check %r: verdict %r is not one of %s" % (name, verdict, ", ".join(VERDICTS)))
    out = {"name": name, "verdict": verdict, "expected": expected, "actual": actual}
    if detail:
        out["detail"] = detail
    return out
