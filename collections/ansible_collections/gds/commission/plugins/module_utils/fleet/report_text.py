# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values as the report writes them (fleet/report.py and its parts): figures as text, "unknown"
for what is no figure, messages cut short, and strict JSON. Never raises on what a host recorded."""
from __future__ import annotations

import datetime
import html
import json
import math
import re
import time

from ansible_collections.gds.commission.plugins.module_utils.core.numbers import is_figure
from ansible_collections.gds.commission.plugins.module_utils.core.files import printable


def check_value(value):
    """A check's value as it is, but an integer too long to print (over 10000 bits) as text.
    Figures no float can hold stay numbers: where one is needed they are skipped (_figure,
    fleet/metrics.format_value)."""
    return printable(value) if isinstance(value, int) and value.bit_length() > 10000 else value


def html_text(value):
    """Text for HTML, in an element or a quoted attribute: markup and quotes escaped, characters
    no page should hold (controls, bytes that were not UTF-8) written as their escape."""
    return html.escape(printable(value), quote=True)


def as_text(value):
    """Text as it is; anything else as its text (an integer too long to print as a note)."""
    return value if isinstance(value, str) else printable(value, controls=False)


def short_text(value, limit=300):
    """A value as a message shows it: text as it is, else its repr, cut at ``limit``; never raises."""
    try:
        text = value if isinstance(value, str) else printable(value) if isinstance(value, int) else repr(value)
    except (ValueError, RecursionError):  # a value nested too deep to print
        text = "(a %s too large to show)" % type(value).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def figure_text(value, form="%.4g"):
    """A figure as text; "unknown" for what is none (NaN, infinity, 10**400, text): never raises."""
    return form % value if is_figure(value) else "unknown"


def table_figure(value, form="%.4g"):
    """A table's figure: "-" for none recorded, an integer as it is, "unknown" for what is no figure."""
    if value is None:
        return "-"
    return value if is_figure(value) and isinstance(value, int) else figure_text(value, form)


def share_text(part, whole, form="%.0f %%"):
    """part / whole as "42 %"; "-" when either is no figure, "unknown" when the share is none."""
    return figure_text(100.0 * part / whole, form) if is_figure(part) and is_figure(whole) and whole else "-"


def epoch_of(iso):
    """Unix time of an ISO 8601 string; now when it cannot be read."""
    try:
        return datetime.datetime.fromisoformat(str(iso)).timestamp()
    except (TypeError, ValueError):
        return time.time()


JSON_DEPTH = 64


def json_ready(value, depth=0):
    """``value`` as strict JSON can hold it: lone surrogates escaped (core/files.printable; JSON
    escapes control characters itself), NaN and infinities as the strings "NaN", "Infinity",
    "-Infinity", keys as text, integers too long to print as text, and nothing nested deeper than
    JSON_DEPTH (a note in its place)."""
    if isinstance(value, str):
        return printable(value, controls=False)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, int):
        return value if value.bit_length() <= 10000 else printable(value)  # Python prints 4300 digits at most
    if depth >= JSON_DEPTH:
        return "(nested deeper than %d levels)" % JSON_DEPTH
    if isinstance(value, dict):
        return {printable(key, controls=False): json_ready(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_ready(item, depth + 1) for item in value]
    return printable(value, controls=False)


def to_json(doc, indent=2):
    """Strict JSON (RFC 8259: no NaN, every string valid UTF-8), ASCII only. ``indent`` None: one
    line (Python indents without its C encoder: a file no person reads is written compact)."""
    try:
        # most documents need no json_ready (a walk in Python): the C encoder tells
        json.dumps(doc, sort_keys=True, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (ValueError, TypeError, RecursionError):  # UnicodeEncodeError is a ValueError
        doc = json_ready(doc)
    separators = None if indent is not None else (",", ":")
    return json.dumps(doc, indent=indent, sort_keys=True, allow_nan=False, separators=separators) + "\n"


# Problems first: every check that is not PASS or SKIP on a row of its own, then each run of PASS
# as one line and each run of SKIP of one reason as one line (report.html's <details>, opened on a
# click; the JUnit's one test case): a host whose checks all pass reads in a few lines, whatever
# the count of its links or ports.
FOLDED = ("PASS", "SKIP")
_ADDRESS = re.compile(r"\b[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\b|\b(mlx5|nvme|md|GPU|gpu|vd|sd)[0-9]+(n[0-9]+)?\b")


def fold_reason(check):
    """A SKIP's reason with its device names made alike, so that one reason folds one run of rows."""
    text = str(check.get("detail") or check.get("actual") or "")
    return re.sub(r"\s+", " ", _ADDRESS.sub("…", text)).strip()[:160] or "no reason given"


def folds(rows, verdict_of=lambda row: row["verdict"], reason_of=fold_reason):
    """(shown, [(title, rows)]): the rows that are not PASS or SKIP, then the folds: every PASS
    row in one, the SKIP rows in one per reason, in the order they first appear."""
    shown, passed, skipped = [], [], {}
    for row in rows:
        verdict = verdict_of(row)
        if verdict == "PASS":
            passed.append(row)
        elif verdict == "SKIP":
            skipped.setdefault(reason_of(row), []).append(row)
        else:
            shown.append(row)
    out = [("%d PASS" % len(passed), passed)] if passed else []
    out += [("%d SKIP: %s" % (len(group), reason), group) for reason, group in skipped.items()]
    return shown, out
