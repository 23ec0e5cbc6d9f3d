# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gdsbench's vocabulary on the controller: transfer types chosen by their capability flags,
I/O types, sizes and the job-file keys' bounds.

The benchmark is the one source (its tables, printed by ``gdsbench --capabilities``); the plan
runs before gdsbench is built on a node, so the data comes from measure/gdsbench_vocab.py,
generated from that output (``make capabilities``). Nothing here lists a transfer-type number:
a question such as "does this type go through libcufile" is asked of its flags.
"""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.measure.gdsbench_vocab import VOCABULARY

_TYPES = {t["number"]: t for t in VOCABULARY["xfer_types"]}
_IO = {t["key"]: t for t in VOCABULARY["io_types"]}
_KEYS = {k["key"]: k for k in VOCABULARY["job_keys"]}
_UNITS = dict(VOCABULARY["sizes"]["units"])
SIZE_MAX = VOCABULARY["sizes"]["max"]


def xfer_types(flag=None, without=None):
    """The numbers of the transfer types gdsbench runs that have ``flag`` and lack ``without``."""
    return tuple(sorted(n for n, t in _TYPES.items() if not t.get("refused")
                        and (flag is None or flag in t["flags"]) and (without is None or without not in t["flags"])))


# through a GPU; through libcufile (cuFile's statistics and path.mode); buffered (the page cache)
GPU_XFER_TYPES = xfer_types("gpu")
CUFILE_XFER_TYPES = xfer_types("cufile")
BUFFERED_XFER_TYPES = xfer_types(without="odirect")


def xfer_name(value):
    """A transfer type's name ("GPUD", "CPUONLY"...), or the value as text when it names none."""
    t = _TYPES.get(value) if isinstance(value, int) and not isinstance(value, bool) else None
    return t["name"] if t else str(value)


def xfer_type_error(value):
    """Why ``value`` is not a transfer type gdsbench runs (None when it is one)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "expected a transfer type number (%s)" % _type_list()
    t = _TYPES.get(value)
    if t is None:
        return "%d is not a transfer type (%s)" % (value, _type_list())
    if t.get("refused"):
        return "%d (%s) %s" % (value, t["name"], t["refused"])
    return None


def _type_list():
    return ", ".join("%d %s" % (n, _TYPES[n]["name"]) for n in xfer_types())


IO_TYPES = {key: t["number"] for key, t in _IO.items()}


def io_is_write(key):
    """True for the I/O types that write (an unknown key is not one)."""
    return bool(_IO.get(key, {}).get("write"))


def io_is_read(key):
    """True for the I/O types that read (an unknown key is not one)."""
    return key in _IO and not _IO[key]["write"]


def size_bytes(word):
    """A size as gdsbench reads it (digits, then an optional K/M/G/T, i and B, any case): its
    bytes, or None when gdsbench would refuse it (no number, a fraction, a sign, 0 or past its
    largest size)."""
    if isinstance(word, int) and not isinstance(word, bool):
        word = str(word)
    if not isinstance(word, str) or not word.isascii():
        return None
    digits = word[:len(word) - len(word.lstrip("0123456789"))]
    rest = word[len(digits):]
    if not digits or len(digits) > 20:
        return None
    mult = 1
    if rest:
        mult = _UNITS.get(rest[0].upper())
        if mult is None:
            return None
        rest = rest[1:]
        for suffix in VOCABULARY["sizes"]["unit_suffixes"]:
            if rest[:1].upper() == suffix.upper():
                rest = rest[1:]
    value = int(digits) * mult
    return value if not rest and 0 < value <= SIZE_MAX else None


def key_range(key):
    """(min, max) of a numeric job-file key (``num_threads``, ``gpu_dev_id``, ...)."""
    entry = _KEYS[key]
    return entry["min"], entry["max"]
