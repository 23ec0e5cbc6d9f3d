# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Report checks: the one shape every role's verdicts take.

A check is ``{name, verdict, expected, actual, detail?}``; ``name`` starts with its area
(``acs: ``, ``iommu: ``, ``driver: ``, ``raid: ``, ``cufile: ``, ``bench: ``). Roles record
their list as the host fact ``gds_<role>_checks``; the report collects those. Only what every
area uses lives here; each area's verdicts live in its own layer file (hw/affinity.py for the
topology, tune/acs.py, tune/iommu.py, tune/driver.py, ...).

Unknown is never PASS: ``check()`` turns a PASS whose ``actual`` or declared ``inputs`` hold an
unknown (None, a missing member, ``unknown``, NaN, infinity, a negative figure) into SKIP, or
WARN where some of them are known, and says why in ``detail``. Every check passes through it.
"""
from __future__ import annotations

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
    area = area_of(name)
    if area:
        out["area"] = area
    out.update((key, value) for key, value in extra.items() if value is not None)
    return out


def area_of(name):
    """The area a check's name starts with (``bench`` of ``bench: raid1 seq_read: iops``), or
    None: said once, here, where the record is made, so that no reader parses a name."""
    if not isinstance(name, str) or ":" not in name:
        return None
    return name.split(":", 1)[0].strip() or None


def named_subject(name, low=None, high=None):
    """What a record without keys (made by an older version, or by hand) says in its name: its
    area, and for a benchmark threshold (``bench: <job>: <metric>`` with a bound) the job and the
    metric. For the report's door (fleet/report_inputs.normalize_check) alone: records made now
    carry these keys (check, subject)."""
    out = {"area": area_of(name)}
    parts = name.split(": ") if isinstance(name, str) else []
    if out["area"] == "bench" and len(parts) >= 3 and (low is not None or high is not None):
        out.update(job=": ".join(parts[1:-1]), metric=parts[-1])
    return out


# what a check is about, as data (docs/reports.md, the check record): a reader finds a job's,
# GPU's, NIC's or port's checks by these keys, never by the name
SUBJECT_KEYS = ("job", "metric", "gpu", "nic", "port", "bdf", "array")


def subject(checks, **keys):
    """``checks`` with each of ``keys`` (SUBJECT_KEYS) set where a check does not carry it
    already; a None value sets nothing. Returns the same list."""
    unknown = set(keys) - set(SUBJECT_KEYS)
    if unknown:
        raise ValueError("subject keys %s are not among %s" % (sorted(unknown), ", ".join(SUBJECT_KEYS)))
    for item in checks:
        if isinstance(item, dict):
            for key, value in keys.items():
                if value is not None:
                    item.setdefault(key, value)
    return checks


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
