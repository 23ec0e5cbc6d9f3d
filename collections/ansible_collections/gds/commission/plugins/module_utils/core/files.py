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

Every read of a file, a node's or the controller's, goes through ``read_bounded``: a regular
file only (a FIFO or a device at a config file's path would block or never end), opened
non-blocking, not through a link where the path is the product's own (``follow=False``), at most
``limit`` bytes (more is an error, or cut off where a prefix is the answer), and no longer than
``seconds`` between the chunks it reads. tests/unit/test_files.py fails on a bare ``open()``
in module_utils. ``read_text``/``listdir`` are tolerant: a missing or unreadable entry is simply
absent, for the many optional attributes where "not there" is an answer. ``read_file`` is strict:
it raises UnreadableFile naming the path. ``resolve`` tells a symlink loop or a dangling link from a good one.

The benchmark's data files (``open_dir``, ``data_file``, ``remove_file``, ``remove_dir``) may sit
in a directory that others can write: they are reached only through a directory descriptor, never
through a link in the last component, and removed only while they are still what this run made.
roles/gds_bench/files/bench/datafile.c applies the same rule inside gdsbench (docs/benchmark.md#data-files).
"""
from __future__ import annotations

import errno
import os
import re
import shutil
import stat
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

    def __init__(self, path, reason, errno_=None):
        Exception.__init__(self, "cannot read %s: %s" % (path, reason))
        self.path = path
        self.reason = reason
        self.errno = errno_  # the OSError's, when the file could not be opened (ENOENT: not there)


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


READ_LIMIT = 16 << 20
READ_SECONDS = 60
_CHUNK = 1 << 20


def read_bounded(path, limit=READ_LIMIT, follow=True, seconds=READ_SECONDS, truncate=False):
    """The bytes of the regular file at ``path``: the one read of a file (see the module's doc).
    Raises UnreadableFile naming the path and why: it cannot be opened (``errno`` set), it is not a
    regular file, it is a link and ``follow`` is false, it holds more than ``limit`` bytes (with
    ``truncate``: its first ``limit`` bytes are the answer), or reading it took over ``seconds``."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        reason = "a symbolic link, not followed" if exc.errno == errno.ELOOP and not follow else exc.strerror or str(exc)
        raise UnreadableFile(path, reason, exc.errno)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnreadableFile(path, "%s, not a regular file" % _kind(mode))
        deadline, chunks, size = time.monotonic() + seconds, [], 0
        while True:
            try:
                chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
            except OSError as exc:
                raise UnreadableFile(path, exc.strerror or str(exc), exc.errno)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                if truncate:
                    return b"".join(chunks)[:limit]
                raise UnreadableFile(path, "larger than %d bytes, more than such a file holds" % limit)
            if time.monotonic() > deadline:
                raise UnreadableFile(path, "still reading after %d s" % seconds)
    finally:
        os.close(fd)


def read_bytes(path, limit=1 << 20):
    """The file's bytes (at most ``limit``: a longer one is cut there), or None when it cannot be read."""
    try:
        return read_bounded(path, limit, truncate=True)
    except UnreadableFile:
        return None


def read_text(path, limit=1 << 20):
    """The file's text (at most ``limit`` bytes, decoded as above), or None when unreadable."""
    data = read_bytes(path, limit)
    return None if data is None else decode(data, path)


def read_file(path, limit=READ_LIMIT, follow=True):
    """The file's text; raises UnreadableFile naming the path when it cannot be read (read_bounded)."""
    return decode(read_bounded(path, limit, follow=follow), path)


def read_utf8(path, limit=READ_LIMIT, follow=True):
    """The file's text, which must be UTF-8 (a config file a parser reads); raises UnreadableFile
    naming the path and the first byte that is not."""
    data = read_bounded(path, limit, follow=follow)
    try:
        return data.decode(ENCODING)
    except UnicodeDecodeError as exc:
        raise UnreadableFile(path, "not UTF-8 (byte 0x%02x at offset %d)" % (data[exc.start], exc.start))


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


# ---- the benchmark's data files and directories: never through a link ----------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISLNK, "a symbolic link"))


class UnsafeFile(Exception):
    """A benchmark target refused by the rule of ``data_file_refusal``; the message names the path
    and which part of the rule."""

    def __init__(self, path, reason):
        Exception.__init__(self, "refusing %s: %s" % (path, reason))
        self.path = path
        self.reason = reason


def _kind(mode):
    return next((name for test, name in _KINDS if test(mode)), "an unknown file type")


def data_file_refusal(st):
    """Why the file an lstat found may not be opened as a data file, or None: a symbolic link, not
    a regular file, or owned by another user (the wording of gdsbench's datafile.c)."""
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link, not followed"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (%s)" % _kind(st.st_mode)
    if st.st_uid != os.geteuid():
        return "owned by uid %d, not by the running user (uid %d)" % (st.st_uid, os.geteuid())
    return None


def file_id(st):
    """What tells one file from another that took its name: (device, inode)."""
    return (st.st_dev, st.st_ino)


def _lstat_at(dir_fd, name):
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _dir_error(path, exc, follow, dir_fd=None, name=None):
    """UnsafeFile for a link (unless followed) or a file that is not a directory, else ``exc``."""
    try:
        st = os.stat(name if dir_fd is not None else path, dir_fd=dir_fd, follow_symlinks=follow)
    except OSError:
        return exc
    if stat.S_ISLNK(st.st_mode):
        return UnsafeFile(path, "a symbolic link, not followed (give the directory it points to)")
    if not stat.S_ISDIR(st.st_mode):
        return UnsafeFile(path, "not a directory (%s)" % _kind(st.st_mode))
    return exc


def open_dir(path, made=None, follow=False):
    """A descriptor (O_RDONLY|O_DIRECTORY) of the directory ``path``, absolute. Its last component
    is not followed when it is a link (UnsafeFile) unless ``follow``: a directory above a target,
    whose links are the user's (/data -> /mnt/data). With ``made`` (a list), a missing directory is
    created one component at a time, each opened through its parent's descriptor and appended as
    (parent descriptor, name, file_id, path), outermost first; the caller closes those parents."""
    try:
        return os.open(path, _DIR_FLAGS | (0 if follow else os.O_NOFOLLOW))
    except OSError as exc:
        if exc.errno != errno.ENOENT or made is None or os.path.dirname(path) == path:
            raise _dir_error(path, exc, follow)
    parent = open_dir(os.path.dirname(path), made, follow=True)
    name, kept = os.path.basename(path), False
    try:
        try:
            os.mkdir(name, 0o755, dir_fd=parent)
            new = True
        except FileExistsError:
            new = False  # made by someone else meanwhile: used as it is, never removed
        try:
            fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=parent)
        except OSError as exc:
            raise _dir_error(path, exc, False, parent, name)
        if new:
            made.append((parent, name, file_id(os.fstat(fd)), path))
            kept = True
        return fd
    finally:
        if not kept:
            os.close(parent)


def data_file(dir_fd, name, path):
    """The lstat of ``name`` in the directory ``dir_fd``, None when there is none; UnsafeFile
    (naming ``path``) when it is there and ``data_file_refusal`` refuses it."""
    st = _lstat_at(dir_fd, name)
    reason = data_file_refusal(st) if st is not None else None
    if reason:
        raise UnsafeFile(path, reason)
    return st


def new_regular_file(dir_fd, name):
    """file_id of ``name`` in ``dir_fd`` when it is a regular file (not followed), else None."""
    try:
        st = _lstat_at(dir_fd, name)
    except OSError:
        return None
    return file_id(st) if st is not None and stat.S_ISREG(st.st_mode) else None


def _remove(dir_fd, name, ident, is_kind, remove):
    try:
        st = _lstat_at(dir_fd, name)
        if st is None or not is_kind(st.st_mode) or file_id(st) != ident:
            return False  # gone, or no longer what this run made (a link swapped in): left alone
        remove(name, dir_fd=dir_fd)
        return True
    except OSError:
        return False


def remove_file(dir_fd, name, ident):
    """Remove ``name`` from the directory ``dir_fd`` only while it is still the regular file
    ``ident`` (file_id): unlinkat through the descriptor, never through a link. True when removed."""
    return _remove(dir_fd, name, ident, stat.S_ISREG, os.unlink)


def remove_dir(parent_fd, name, ident):
    """Remove the empty directory ``name`` of ``parent_fd`` only while it is still ``ident``."""
    return _remove(parent_fd, name, ident, stat.S_ISDIR, os.rmdir)


# ---- files the tuning roles wrote: removed only when they are still the product's -------------

# the first line of every file a role writes on a node (templates, modprobe and modules-load files)
MANAGED_MARKER = "Managed by gds-commission"


def managed_file(path):
    """(present, why it is not ours or None) of the file a role wrote at ``path``: not followed
    when it is a link; ours when it is a regular file whose first 512 bytes carry MANAGED_MARKER."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False, None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        return True, "%s, not a file gds-commission wrote" % _kind(st.st_mode)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return True, "cannot read it (%s)" % (exc.strerror or exc)
    try:
        head = os.read(fd, 512)
    finally:
        os.close(fd)
    if MANAGED_MARKER.encode() not in head:
        return True, "it does not say '%s' in its first lines: someone else's file" % MANAGED_MARKER
    return True, None


def remove_managed(path):
    """Remove the file at ``path`` only while it is the product's (``managed_file``), through its
    directory's descriptor and only while the name still holds the file that was checked.
    (removed, why it was left or None)."""
    present, foreign = managed_file(path)
    if not present or foreign:
        return False, foreign
    dir_fd = os.open(os.path.dirname(path) or ".", _DIR_FLAGS | os.O_NOFOLLOW)
    try:
        name = os.path.basename(path)
        st = _lstat_at(dir_fd, name)
        if st is None or not _remove(dir_fd, name, file_id(st), stat.S_ISREG, os.unlink):
            return False, "it changed while it was being removed"
        return True, None
    finally:
        os.close(dir_fd)


def _current(path):
    """(text or None, mode or None, uid, gid) of what is at ``path``: None text when there is no
    regular file there (nothing, or a link, which write_atomic replaces as the template module
    does; a directory is left to os.replace to refuse)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None, None, None
    if not stat.S_ISREG(st.st_mode):
        return None, None, None, None
    return decode(read_bounded(path, follow=False), path), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def sync_managed(entries, check_mode):
    """Put each of a role's files in the state its entry asks, in order: ``state`` ``present``
    writes ``content`` (atomically, its directories made) and sets ``mode`` and, given, ``uid``
    and ``gid`` when they differ; ``absent`` removes it only while it is the product's
    (``remove_managed``; someone else's file is left, said in ``left``). Nothing is touched in
    check mode. One dict per entry: path, state, present (before), changed, left, before and
    after (the text, None when there is no file)."""
    out = []
    for entry in entries:
        path, state = entry["path"], entry.get("state") or "present"
        row = {"path": path, "state": state, "present": os.path.lexists(path), "changed": False, "left": None,
               "before": None, "after": None}
        if state == "absent":
            present, left = managed_file(path)
            row["left"] = left
            if present and not left:
                row["before"] = _current(path)[0]
                row["changed"] = True
                if not check_mode:
                    removed, row["left"] = remove_managed(path)
                    row["changed"] = removed
            out.append(row)
            continue
        text, mode, uid, gid = _current(path)
        want_mode = entry.get("mode", 0o644)
        row.update(before=text, after=entry["content"])
        owner = [entry.get("uid"), entry.get("gid")]
        rewrite = text != entry["content"]
        fix_owner = not rewrite and any(want is not None and want != have for want, have in zip(owner, (uid, gid)))
        fix_mode = not rewrite and mode != want_mode
        row["changed"] = rewrite or fix_owner or fix_mode
        if row["changed"] and not check_mode:
            if rewrite:
                write_atomic(path, entry["content"], want_mode)
            elif fix_mode:
                os.chmod(path, want_mode)
            if any(want is not None for want in owner):
                os.lchown(path, -1 if owner[0] is None else owner[0], -1 if owner[1] is None else owner[1])
        row.update(mode_before=mode, mode_after=want_mode)
        out.append(row)
    return out
