# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader for sysfs and procfs files.

The kernel hands out bytes, not UTF-8: a mount point may hold any byte but NUL and '/', and a
corrupted file may hold anything. Every text read here decodes UTF-8 with ``surrogateescape``, so
undecodable bytes survive as lone surrogates (``os`` functions turn them back into the same
bytes) instead of ending the run in a UnicodeDecodeError that names no file.

Those surrogates must not cross the module boundary: ansible-core refuses a result that is not
valid UTF-8 ("Refusing to deserialize an invalid UTF8 string value") and fails the whole task
without naming a file. ``json_safe`` escapes them as ``\\xNN`` (the byte's value) and names the
fields; ``undecodable_files`` names the files read here that held them (plugins/module_utils/core/module.py
does both for every module).

``read_text``/``listdir`` are tolerant: a missing or unreadable entry is simply absent, for the
many optional attributes where "not there" is an answer. ``read_file`` is strict: it raises
UnreadableFile naming the path. ``resolve`` tells a symlink loop or a dangling link from a good one.
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import tempfile
import time

ENCODING = "utf-8"
ERRORS = "surrogateescape"

_NATURAL = re.compile(r"(\d+)")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Files (and directories, for entry names) read here that held bytes that are not UTF-8. A module
# runs once per process, so one list for the run names them all at the boundary.
_UNDECODABLE = []


class UnreadableFile(Exception):
    """A file that must be read cannot be; the message names it."""

    def __init__(self, path, reason):
        Exception.__init__(self, "cannot read %s: %s" % (path, reason))
        self.path = path
        self.reason = reason


def decode(data, path=None):
    """Kernel bytes -> str; bytes that are not UTF-8 become lone surrogates, never an error.
    ``path`` (where the bytes came from) is recorded for ``undecodable_files`` when they do."""
    try:
        return data.decode(ENCODING)
    except UnicodeDecodeError:
        _record(path)
        return data.decode(ENCODING, ERRORS)


def _record(path):
    if path is not None and path not in _UNDECODABLE:
        _UNDECODABLE.append(path)


def undecodable_files():
    """Paths read through this module that held bytes that are not UTF-8, in the order read."""
    return list(_UNDECODABLE)


def escape_surrogates(text):
    """``text`` as valid UTF-8: each lone surrogate escaped (``\\xff`` for the byte 0xFF)."""
    return _SURROGATE.sub(_escaped, text)


def json_safe(value, where="", fields=None):
    """(copy of ``value`` whose strings and keys are all valid UTF-8, [fields that were not]).

    A field is named as a path into ``value`` (``mounts[2].mountpoint``); dicts, lists and
    tuples are walked, other values returned as they are."""
    fields = [] if fields is None else fields
    if isinstance(value, str):
        if _SURROGATE.search(value):
            fields.append(where or "(value)")
            return escape_surrogates(value), fields
        return value, fields
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(key, str) and _SURROGATE.search(key):
                key = escape_surrogates(key)
                fields.append("%s key %s" % (where or "(value)", key))
            out[key] = json_safe(item, "%s.%s" % (where, key) if where else str(key), fields)[0]
        return out, fields
    if isinstance(value, (list, tuple)):
        return [json_safe(item, "%s[%d]" % (where, i), fields)[0]
                for i, item in enumerate(value)], fields
    return value, fields


def is_live_root(path, live):
    """True when ``path`` is the running system's own ``live`` mount (``/sys``, ``/proc``), not a
    fixture tree or a guest image: only then may code act on the devices it shows."""
    try:
        return os.path.realpath(path) == live
    except (OSError, ValueError):
        return False


def natural_key(name):
    """Sort key that orders ``nvme2`` before ``nvme10``."""
    return [int(part) if part.isdigit() else part for part in _NATURAL.split(str(name))]


def read_bytes(path, limit=1 << 20):
    """The file's bytes (at most ``limit``), or None when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return handle.read(limit)
    except OSError:
        return None


def read_text(path, limit=1 << 20):
    """The file's text (at most ``limit`` bytes, decoded as above), or None when unreadable."""
    data = read_bytes(path, limit)
    return None if data is None else decode(data, path)


def read_file(path, limit=16 << 20):
    """The file's text; raises UnreadableFile naming the path when it cannot be read."""
    try:
        with open(path, "rb") as handle:
            return decode(handle.read(limit), path)
    except OSError as exc:
        raise UnreadableFile(path, exc.strerror or str(exc))


def listdir(path, key=None):
    """Sorted entries of a directory ([] when it is missing or unreadable)."""
    try:
        names = sorted(os.listdir(path), key=key)
    except OSError:
        return []
    if any(_SURROGATE.search(name) for name in names):
        _record(path)  # an entry name that is not UTF-8 (os.listdir escapes it the same way)
    return names


def resolve(path):
    """(real path, problem): problem is None, or why the link cannot be followed
    ("symlink loop", "dangling link to X", or the OS error)."""
    real = os.path.realpath(path)
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return real, "symlink loop"
        if exc.errno == errno.ENOENT and os.path.lexists(path):
            return real, "dangling link to %s" % real
        return real, exc.strerror or str(exc)
    return real, None


def write_atomic(path, text, mode=0o644):
    """Write ``text`` to a temporary file in the same directory, then rename it over ``path``:
    a reader sees the old file or the new one, never half of one. UTF-8 whatever the locale, and
    bytes read as surrogates (``decode``) written back as the bytes they were."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding=ENCODING, errors=ERRORS) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def backup_copy(path):
    """A timestamped copy next to ``path`` (the name Ansible's backup option uses); its path."""
    dest = "%s.%s.%s~" % (path, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S"))
    shutil.copy2(path, dest)
    return dest


# Characters a report must not carry as they are: C0 controls but tab and line feed, DEL, C1
# controls, lone surrogates (bytes that were not UTF-8, see decode) and U+FFFE/U+FFFF. XML 1.0
# forbids most of them, UTF-8 cannot hold a surrogate, and terminals act on ESC.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _escaped(match):
    code = ord(match.group(0))
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's byte 0x80..0xFF: show the byte
        return "\\x%02x" % (code - 0xDC00)
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def printable(value, controls=True):
    """``value`` as text that every report format can carry: each character above written as its
    escape (``\\x1b`` for ESC, ``\\xff`` for a byte 0xFF that was not UTF-8). With ``controls``
    false only the lone surrogates are (for JSON, which escapes control characters itself)."""
    if value is None:
        text = ""
    elif isinstance(value, str):
        text = value
    elif isinstance(value, int) and value.bit_length() > 10000:
        text = "(an integer of %d bits)" % value.bit_length()  # str() refuses over 4300 digits
    else:
        text = str(value)
    return (_UNPRINTABLE if controls else _SURROGATE).sub(_escaped, text)
