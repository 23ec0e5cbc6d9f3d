# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every file, directory and link the fleet layer writes, replaces or reads back, through one
rule (docs/reports.md#what-a-run-writes-and-what-it-leaves-alone).

The directory a user names (``reports_dir``, node_exporter's textfile directory) is theirs: a link
there is followed, and it is made when missing. Below it every step goes through an open
directory: a directory the product makes (a run directory, ``history/``, ``.state/``) is opened
without following a link; a file is written under a new name of its own (O_EXCL) and renamed
over a regular file only; ``latest`` is replaced only while it is a link to a run directory of
the same directory. Anything else in the way (a link, a directory, a fifo, another tool's
``latest``) is refused with RefusedPath naming it, and nothing is ever removed but the
temporary names made here.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
import time

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a fifo in a file's place must not hang the run


class RefusedPath(OSError):
    """A path the fleet layer will not write, replace or read through: it cannot tell that it
    made what is there. The message names the path."""


def _kind(st):
    if st is None:
        return "missing"
    if stat.S_ISLNK(st.st_mode):
        return "a link"
    if stat.S_ISDIR(st.st_mode):
        return "a directory"
    return "a file" if stat.S_ISREG(st.st_mode) else "a special file"


class OutDir(object):
    """An open directory to write in: ``OutDir(path)`` for one the user named (made when
    missing unless ``create`` is false), ``child(name)`` for one the product makes in it."""

    def __init__(self, path, create=True, fd=None, follow=True):
        self.path = path
        if fd is None:
            if create and not os.path.lexists(path):
                os.makedirs(path, 0o755, exist_ok=True)
            try:  # follow false: a link in the directory's own place is refused, never written through
                fd = os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC | (0 if follow else _NOFOLLOW))
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR) and not follow and os.path.islink(path):
                    raise RefusedPath("%s is a symbolic link, not followed: name the directory it points at"
                                      % path) from None
                raise
        self.fd = fd

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def where(self, name):
        return os.path.join(self.path, name)

    def lstat(self, name):
        """What ``name`` is, never following a link; None when there is nothing."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def _refuse(self, name, wanted):
        return RefusedPath("%s is %s, not %s this tool made; left as it is"
                           % (self.where(name), _kind(self.lstat(name)), wanted))

    def child(self, name, create=True):
        """The directory ``name`` in this one, made when missing (``create``); a link or anything
        but a directory there is refused. FileNotFoundError when it is missing and not made."""
        if create:
            try:
                os.mkdir(name, 0o755, dir_fd=self.fd)
            except FileExistsError:
                pass
        try:
            fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise self._refuse(name, "a directory")
            raise
        return OutDir(self.where(name), fd=fd)

    def _new(self, name, mode, suffix=""):
        """(fd, name): a new file under a name of its own beside ``name``; never an existing one."""
        while True:
            tmp = ".%s.%s%s" % (name, secrets.token_hex(4), suffix)
            try:
                return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, mode,
                               dir_fd=self.fd), tmp
            except FileExistsError:
                continue

    def write(self, name, text, mode=0o644, sync=True):
        """Put ``text`` (UTF-8) in place as ``name`` atomically, replacing only a regular file;
        its path. A lone surrogate that escaped the writers is shown, never a failed run."""
        st = self.lstat(name)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise self._refuse(name, "a file")
        fd, tmp = self._new(name, 0o600)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
                handle.write(text)
                if sync:
                    handle.flush()
                    os.fsync(handle.fileno())
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self._drop(tmp)
            raise
        return self.where(name)

    def _drop(self, tmp):
        """Remove a temporary name made here (and only that)."""
        try:
            os.unlink(tmp, dir_fd=self.fd)
        except FileNotFoundError:
            pass

    def read_bytes(self, name, limit=None):
        """The bytes of the regular file ``name`` (at most ``limit``, None: all); None when there is none.
        A link or anything but a regular file is refused."""
        try:
            fd = os.open(name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self._refuse(name, "a file")
            raise
        try:
            # before fdopen, which refuses a directory with a message naming no path
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise self._refuse(name, "a file")
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as handle:
            return handle.read() if limit is None else handle.read(min(limit, st.st_size + 1))

    def read(self, name, limit=None):
        """read_bytes as UTF-8 text (UnicodeDecodeError, a ValueError, for what is not)."""
        data = self.read_bytes(name, limit)
        return None if data is None else data.decode("utf-8")

    def backup(self, name):
        """A copy of the regular file ``name`` beside it under a new name (``NAME.PID.TIME~``, as
        Ansible's backup option names it); its path."""
        data = self.read_bytes(name)
        if data is None:
            return None
        base = "%s.%s.%s" % (name, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S"))
        for n in range(1000):
            dest = base + ("~" if not n else ".%d~" % n)
            try:
                fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644, dir_fd=self.fd)
            except FileExistsError:
                continue
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            return self.where(dest)
        raise RefusedPath("%s: no free backup name" % self.where(name))

    def set_aside(self, names, folder):
        """Move the regular files ``names`` (never a link or anything else) into the directory
        ``folder`` of this one, made when missing: nothing is removed. The names moved."""
        moved = []
        for name in names:
            st = self.lstat(name)
            if st is None or not stat.S_ISREG(st.st_mode):
                continue
            with self.child(folder) as aside:
                os.rename(name, name, src_dir_fd=self.fd, dst_dir_fd=aside.fd)
            moved.append(name)
        return moved

    def point(self, link, target, ours):
        """Make ``link`` a symbolic link to ``target`` (an entry of this directory) atomically: a
        new link under a name of its own is renamed over the old one, so a reader sees the old
        target or the new one. What is there already is replaced only when it is a link whose
        target ``ours(target)`` accepts and names a directory of this one (or nothing any more)."""
        st = self.lstat(link)
        if st is not None:
            if not stat.S_ISLNK(st.st_mode):
                raise self._refuse(link, "the link")
            current = os.readlink(link, dir_fd=self.fd)
            plain = "/" not in current and current not in ("", ".", "..") and ours(current)
            named = self.lstat(current) if plain else None
            if not plain or (named is not None and not stat.S_ISDIR(named.st_mode)):
                raise RefusedPath("%s is a link to %r, not the link to a run directory beside it that this tool "
                                  "made; left as it is" % (self.where(link), current))
        while True:
            tmp = ".%s.%s.tmp" % (link, secrets.token_hex(6))
            try:
                os.symlink(target, tmp, dir_fd=self.fd)  # fails, never follows, when the name is taken
                break
            except FileExistsError:
                continue
        try:
            # a directory put there since the look above makes this fail: it is never replaced
            os.replace(tmp, link, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self._drop(tmp)
            raise
        return self.where(link)
