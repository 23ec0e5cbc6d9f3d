# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the report reads of each host and whether it can read it: the host variables and facts
(host_inputs), the shape the report walks (INPUT_SHAPE, input_problems) and the check record as
every writer may rely on it (normalize_check)."""
from __future__ import annotations

import re

from ansible_collections.gds.commission.plugins.module_utils.core.checks import SUBJECT_KEYS, VERDICTS, named_subject, refuse_unknown
from ansible_collections.gds.commission.plugins.module_utils.core.checks import check as make_check
from ansible_collections.gds.commission.plugins.module_utils.hw.facts_schema import PLATFORM, TOPOLOGY
from ansible_collections.gds.commission.plugins.module_utils.fleet.report_text import as_text, check_value, short_text


# --------------------------------------------------------------------------------------------
# What the report reads of each host: one map for the report play's filter
# (plugins/filter/gds_report_hosts.py) and the callback's own report (plugins/callback/
# gds_commission.py), so both judge a host from the same data
# --------------------------------------------------------------------------------------------
# host variable (set_fact) -> HOST.json key
REPORT_VARS = {"gds_raid_arrays": "arrays", "gds_bench_results": "bench", "gds_rdma_bench_results": "rdma_bench"}
# ansible_facts entry -> HOST.json key
REPORT_FACTS = {"gds_topology": "topology", "gds_platform": "platform"}
# the defaults of gds_report_check_vars and gds_report_required_areas (the role's spec in
# fleet/report.py reads them)
CHECK_VARS = r"^(gds|pcie_acs|iommu|gds_driver|nvme_raid|cufile)_[a-z0-9_]*checks$"
REQUIRED_AREAS = ("bench",)
REBOOT_VARS = re.compile(r"^gds_\w*reboot_required$")


def recorded_checks(value):
    """The checks a check variable holds: a list of check records, or the registered result of a
    module that returns them as ``checks`` (a role that registers its module's result under the
    variable's name needs no task to copy them); a skipped task's result holds none. Anything else
    is read as a check record (normalize_check makes what is no check an ERROR)."""
    if isinstance(value, dict) and "verdict" not in value:
        if "checks" in value:
            return value["checks"]
        if value.get("skipped") is True:
            return []
    return value


def flatten(value):
    """The items of nested lists, in order (a loop, not a recursion: nesting of any depth)."""
    out, todo = [], [value]
    while todo:
        item = todo.pop()
        if isinstance(item, (list, tuple)):
            todo.extend(reversed(item))
        else:
            out.append(item)
    return out


def host_inputs(variables, facts, check_vars=CHECK_VARS):
    """{checks, topology, arrays, bench, rdma_bench, reboot_required, platform}: what the report
    reads of one host, from its variables (checks in their order; only the names that match are
    read) and its ansible_facts. ``check_vars``: a pattern (text or compiled) of the variables
    that hold checks. A variable that cannot be read (a template that fails) is named in
    ``input_error``: the report makes that host ERROR, never the others."""
    pattern = re.compile(check_vars) if isinstance(check_vars, str) else check_vars
    problems = []

    def read(source, name, default=None):
        try:
            return source.get(name, default)
        except Exception as exc:  # whatever a lazy variable raises is this host's problem only
            problems.append("%s: %s" % (name, short_text(str(exc) or type(exc).__name__)))
            return default

    names = list(variables.keys())
    checks = []
    for name in names:
        if pattern.search(name):
            checks.extend(flatten(recorded_checks(read(variables, name, []))))
    out = {"checks": checks}
    for name, key in REPORT_FACTS.items():
        out[key] = read(facts or {}, name)
    for name, key in REPORT_VARS.items():
        out[key] = read(variables, name) or []
    out["reboot_required"] = any(bool(read(variables, name)) for name in names if REBOOT_VARS.search(name))
    if problems:
        out["input_error"] = "cannot read host variable %s" % "; ".join(problems)
    return out


# --------------------------------------------------------------------------------------------
# The check record
# --------------------------------------------------------------------------------------------
# optional keys of a check record kept as they are (docs/reports.md#the-check-record)
# the record's optional keys (docs/reports.md, the check record): what a check is about
# (SUBJECT_KEYS), its bounds, the family a folded SKIP covers
CHECK_KEYS = ("low", "high", "unit", "reference", "under_load", "previous_run", "covers") + SUBJECT_KEYS


def normalize_check(item):
    """A check as every writer may rely on: a dict with a text name and a known verdict (else
    ERROR); anything that is no check at all becomes an ERROR naming it. A recorded PASS whose
    ``actual`` is unknown is no PASS here either (core/checks.refuse_unknown: SKIP, the reason
    added to ``detail``): what a host recorded is judged by the same rule as what it built."""
    if not isinstance(item, dict):
        return make_check("host: check record", "ERROR", "a check record", short_text(item),
                          "the host recorded something that is not a check")
    verdict = item.get("verdict", "ERROR")
    verdict = verdict.upper() if isinstance(verdict, str) else "ERROR"
    verdict, why = refuse_unknown(verdict if verdict in VERDICTS else "ERROR", item.get("actual"))
    out = {"name": as_text(item.get("name", "unnamed check")), "verdict": verdict,
           "expected": check_value(item.get("expected")), "actual": check_value(item.get("actual"))}
    # a record made before checks carried their subject (a node of an older version in a fleet
    # being upgraded, or by hand): its area, and a benchmark threshold's job and metric, from its
    # name, here at the report's door and nowhere else
    legacy = {} if isinstance(item.get("area"), str) else named_subject(out["name"], item.get("low"), item.get("high"))
    area = item.get("area") if isinstance(item.get("area"), str) else legacy.get("area")
    if area:
        out["area"] = area
    for key in ("job", "metric"):
        if legacy.get(key) is not None and item.get(key) is None:
            out[key] = legacy[key]
    detail = "; ".join(as_text(part) for part in (item.get("detail"), why) if part)
    if detail:
        out["detail"] = detail
    for key in CHECK_KEYS:
        if item.get(key) is not None:
            out[key] = as_text(item[key]) if key in ("unit", "metric", "job", "nic", "array", "bdf") else check_value(item[key])
    return out


# --------------------------------------------------------------------------------------------
# The shape the report reads
# --------------------------------------------------------------------------------------------
_M, _L = dict, list
_NAMES = (_L, ((str, int), None))  # device names, GPU indices, command words
_SCALARS = {"string", "integer", "number", "boolean", "null"}


def _schema_types(schema):
    """The JSON types a schema node allows ({"object"}, {"string", "null"} ...)."""
    kind = schema.get("type")
    if kind is not None:
        return set(kind) if isinstance(kind, list) else {kind}
    if "anyOf" in schema:
        return set().union(*(_schema_types(member) for member in schema["anyOf"]))
    return {"string"} if "enum" in schema else set()


def fact_shape(schema, levels=None):
    """The shape the report walks of a fact, from its JSON schema (hw/facts_schema.py): each
    object and list of it down ``levels`` levels (None: all), a list of plain values as one of
    names; a leaf, or a value of several kinds, is not walked (None): it is shown, never judged."""
    kinds = _schema_types(schema) - {"null"}
    if kinds == {"object"}:
        if levels == 0:
            return (_M, {})
        deeper = None if levels is None else levels - 1
        inner = {}
        for key, sub in (schema.get("properties") or {}).items():
            shape = fact_shape(sub, deeper)
            if shape:
                inner[key] = shape
        values = schema.get("additionalProperties")
        shape = fact_shape(values, deeper) if isinstance(values, dict) else None
        if shape:
            inner["*"] = shape
        return (_M, inner)
    if kinds == {"array"}:
        items = schema.get("items") or {}
        if _schema_types(items) <= _SCALARS:
            return _NAMES
        return (_L, fact_shape(items, None if levels is None else levels - 1) or (_M, {}))
    return None


# What the report walks of a host's inputs (host_inputs, HOST.json): each key's type where it is
# present (null: not recorded), a list's items, a mapping's keys ("*": each value). Figures are
# shown or "unknown" (figure_text, table_figure), never judged here: the checks are the judges.
# The facts' shapes come from their schema: the topology's every container (the report's tables
# walk it), the platform as one mapping (copied into HOST.json as it is).
INPUT_SHAPE = (_M, {
    "topology": fact_shape(TOPOLOGY),
    "platform": fact_shape(PLATFORM, levels=0),
    "arrays": (_L, (_M, {"members": _NAMES})),
    "bench": (_L, (_M, {"cmd": _NAMES, "record": (_M, {"lat_us": (_M, {}), "path": (_M, {})}),
                        "watch": (_M, {"limit": (_M, {"shared": (_L, (_M, {}))}), "cufile": (_M, {"buffer_gpus": _NAMES}),
                                       "gpus": (_L, (_M, {})), "drives": (_L, (_M, {})), "ceiling": (_M, {}),
                                       "concurrency": (_M, {"jobs": (_L, (_M, {})), "groups": (_L, (_M, {"gpus": _NAMES})),
                                                            "root_ports": (_L, (_M, {"gpus": _NAMES}))})})})),
    "rdma_bench": (_L, (_M, {})),
    "reboot_required": (bool, None),
    "input_error": (str, None),
})
_KINDS = {dict: "a mapping", list: "a list", bool: "true or false", str: "text", (str, int): "a name or an index"}


def input_problems(data, shape=INPUT_SHAPE, where=""):
    """[(top-level key, "bench[0].record is 'x' (str), expected a mapping")]: each place where a
    host's inputs are not of the shape the report reads (INPUT_SHAPE), the first one per key."""
    kind, inner = shape
    if not isinstance(data, kind):
        return [(where.split(".")[0].split("[")[0] or None, "%s is %s (%s), expected %s" % (
            where or "the host's entry", short_text(repr(data) if isinstance(data, str) else data, 60), type(data).__name__,
            _KINDS[kind]))]
    out = []
    if kind is list and inner:
        for i, item in enumerate(data):
            out = input_problems(item, inner, "%s[%d]" % (where, i))
            if out:
                return out[:1]
    elif kind is dict and inner:
        for key, sub in inner.items():
            for name, item in (data.items() if key == "*" else [(key, data.get(key))]):
                found = input_problems(item, sub, "%s.%s" % (where, name) if where else str(name)) if item is not None else []
                if found:
                    out.append(found[0])
                    break
    return out
