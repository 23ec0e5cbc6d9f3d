# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one home of "is this a usable figure" (``figure_fault``, ``is_figure``, ``figure``: what
the checks, the thresholds and the report judge or show), and the one strict reader of the
numbers the watch of a job takes from outside: /proc/diskstats, ``gds_stats`` output and NVML's
answers.

Python accepts too much: ``str.isdigit`` is true for "²" and other scripts' digits (then ``int``
fails), ``int`` takes a 400-digit string (then a float of it overflows), ``float`` takes "nan",
"inf" and "1e999". A number that is none of what its source can print is ``BadNumber``, naming the
value, so the reader can say "unknown" with the reason instead of ending the run or inventing a
figure.
"""
from __future__ import annotations

import math
import re

_DECIMAL = re.compile(r"^[0-9]+(\.[0-9]+)?$")  # ASCII digits only (re's \d takes any script's)
MAX_TEXT = 40  # longer than any counter or decimal the sources print


class BadNumber(ValueError):
    """A value that is not the number its source prints; the message names it."""


def _shown(text):
    try:
        text = str(text)
    except ValueError:  # an integer of more digits than Python prints
        return "(an integer of %d bits)" % text.bit_length()
    return repr(text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "...")


NOT_A_NUMBER = "is not a number"
TOO_LARGE = "is too large for a figure"
NOT_FINITE = "is not a finite number"


def figure_fault(value):
    """What keeps ``value`` from being a usable figure, or None when it is one: NOT_A_NUMBER
    (text, None, a boolean, a container), TOO_LARGE (an integer no float can hold: 10**400),
    NOT_FINITE (NaN, infinity). Its sign is the caller's to judge."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return NOT_A_NUMBER
    try:
        return None if math.isfinite(value) else NOT_FINITE
    except OverflowError:
        return TOO_LARGE


def is_figure(value):
    """A number to compare or show: not a bool, and a finite float can hold it."""
    return figure_fault(value) is None


def figure(value):
    """``value`` when it is a measured figure (is_figure and >= 0), else None: every count, size,
    rate, time, share and index the product measures is one."""
    return value if is_figure(value) and value >= 0 else None


# A denominator below a millionth of its unit (1 KiB/s in GiB/s, one I/O in a million seconds) is
# no measurement: a ratio over it would make anything PASS (1e-300 over 1e-300 is 1)
RATIO_FLOOR = 1e-6
# No figure the benchmark judges reaches this in its units (GiB/s ~1e2, IOPS ~1e7, us ~1e6): one
# that does (1e308 GiB/s) is a record gone wrong, not a fast node, and never a peer of the fleet
PLAUSIBLE_MAX = 1e12


def ratio(numerator, denominator, floor=RATIO_FLOOR):
    """numerator / denominator when both are figures (finite, >= 0) and the denominator is above
    ``floor``; else None (nothing to judge)."""
    if figure(numerator) is None or figure(denominator) is None or denominator <= floor:
        return None
    return numerator / denominator


def counter(text, bits=64):
    """An unsigned counter as the kernel or a tool prints it: ASCII digits only, below 2**bits
    (``unsigned long`` is 64 bits on the kernels that run GPUs)."""
    text = str(text)
    if len(text) > MAX_TEXT or not text.isascii() or not text.isdigit():
        raise BadNumber("%s is not a whole number of ASCII digits" % _shown(text))
    value = int(text)
    if value >= 1 << bits:
        raise BadNumber("%s is above a %d-bit counter" % (_shown(text), bits))
    return value


def decimal(text):
    """A non-negative decimal as a tool prints it ("0.124332", "4996"): a finite float."""
    text = str(text)
    if len(text) > MAX_TEXT or not _DECIMAL.match(text):
        raise BadNumber("%s is not a decimal number" % _shown(text))
    return float(text)


def finite(value, minimum=0.0, maximum=None):
    """A number a library returned (NVML): an int or float, not a bool, finite, within
    [minimum, maximum]; the value as given."""
    fault = figure_fault(value)
    if fault == NOT_A_NUMBER:
        raise BadNumber("%s is not a number" % _shown(value))
    if fault == TOO_LARGE:  # an integer too large for a float: above any bound
        raise BadNumber("%s is above %s" % (_shown(value), maximum if maximum is not None else "what a float holds"))
    if fault:
        raise BadNumber("%s is not finite" % _shown(value))
    if minimum is not None and value < minimum:
        raise BadNumber("%s is below %s" % (_shown(value), minimum))
    if maximum is not None and value > maximum:
        raise BadNumber("%s is above %s" % (_shown(value), maximum))
    return value


def whole(value, minimum=0, maximum=(1 << 64) - 1):
    """An integer a library returned (a count, an index, a bit mask): ``finite`` and whole."""
    value = finite(value, minimum, maximum)
    if isinstance(value, float) and not value.is_integer():
        raise BadNumber("%s is not a whole number" % _shown(value))
    return int(value)


def whole_figure(value):
    """``value`` as an int when it is a whole figure >= 0 (a count, an index, a bit mask read as
    given), else None: unknown."""
    try:
        return whole(value, 0, None)
    except BadNumber:
        return None
