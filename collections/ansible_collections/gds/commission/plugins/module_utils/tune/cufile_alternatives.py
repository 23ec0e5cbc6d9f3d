# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where cuFile reads its configuration: a plain file, a symlink, or the alternatives link of
libcufile's packages, every path followed inside the node's root (NodePaths); update-
alternatives' administrative file read and written."""
from __future__ import annotations

import errno
import os

from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, read_utf8
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile_text import CufileError

# libcufile's packages register the toolkit's gds/cufile.json with update-alternatives:
# /etc/cufile.json -> /etc/alternatives/cufile.json -> /usr/local/cuda-X.Y/gds/cufile.json.
# On a simulated node every node path lives below ``root``; link targets stay node paths,
# exactly what update-alternatives writes on the node. Every path is followed inside the root
# (absolute targets are node paths, ``..`` stops at the node's /), as the node itself would, so
# nothing outside the root is read or written, whatever links the tree holds.
MAX_SYMLINKS = 40  # the kernel's limit on links followed in one lookup


class NodePaths(object):
    def __init__(self, root=""):
        root = (root or "").rstrip("/")
        self.root = os.path.normpath(root) if root else ""

    def local(self, node_path):
        """The node path ``/etc/x`` as a path here (``<root>/etc/x``)."""
        return self.root + node_path if self.root and node_path.startswith("/") else node_path

    def node(self, local_path):
        """A path here below ``root`` as the node sees it."""
        if self.root and (local_path == self.root or local_path.startswith(self.root + "/")):
            return local_path[len(self.root):] or "/"
        return local_path

    def inside(self, local_path):
        """Whether a path here is the root or below it (always, without a root)."""
        if not self.root:
            return True
        root, path = os.path.abspath(self.root), os.path.abspath(local_path)
        return path == root or path.startswith(root.rstrip("/") + "/")

    def here(self, path):
        """A path the caller gave (below the root, or a node path such as the default
        ``/etc/gds-commission/cufile.json``) as a normalised path below the root."""
        if not self.root:
            return os.path.abspath(path)
        if self.inside(path):
            tail = os.path.abspath(path)[len(os.path.abspath(self.root).rstrip("/")):]
            return self.local(os.path.normpath("/" + tail))
        if not path.startswith("/"):
            raise CufileError("%s: give a path below the root %s or an absolute node path"
                              % (path, self.root))
        return self.local(os.path.normpath(path))

    def readlink(self, local_path):
        """The local path a symlink points to (absolute targets are node paths; a relative one
        is taken from the link's directory and cannot climb above the node's /)."""
        target = os.readlink(local_path)
        if not target.startswith("/"):
            target = os.path.join(self.node(os.path.dirname(local_path)), target)
        return self.local(os.path.normpath("/" + target.lstrip("/")))

    def resolve(self, local_path):
        """``local_path`` with every symlink along it followed inside the root, the last one
        included (the path may not exist). Raises CufileError on a loop."""
        node = self.node(self.here(local_path))
        todo = [p for p in node.split("/") if p]
        done, hops = [], 0
        while todo:
            part = todo.pop(0)
            if part in (".", ".."):
                if part == ".." and done:
                    done.pop()
                continue
            candidate = self.local("/" + "/".join(done + [part]))
            if not os.path.islink(candidate):
                done.append(part)
                continue
            hops += 1
            if hops > MAX_SYMLINKS:
                raise CufileError("%s: symlink loop (more than %d links)" % (local_path, MAX_SYMLINKS))
            target = os.readlink(candidate)
            if target.startswith("/"):
                done = []
            todo = [p for p in target.split("/") if p] + todo
        return self.local("/" + "/".join(done))

    def resolve_parent(self, local_path):
        """The directory of ``local_path`` resolved inside the root, its last name kept: where
        a link itself (not its target) is read or replaced."""
        local_path = self.here(local_path)
        return os.path.join(self.resolve(os.path.dirname(local_path)), os.path.basename(local_path))

    def guard(self, local_path):
        """Refuse to write outside the root (the check after the resolution above, against
        links that change under us)."""
        real = os.path.join(os.path.realpath(os.path.dirname(local_path)), os.path.basename(local_path))
        if self.root and not (real == os.path.realpath(self.root)
                              or real.startswith(os.path.realpath(self.root).rstrip("/") + "/")):
            raise CufileError("refusing to write %s: it is %s, outside the node root %s"
                              % (local_path, real, self.root))
        return local_path


def read_alternatives(admin_file):
    """update-alternatives' administrative file for one name, or None when there is none.

    Its format: the mode (auto/manual), the master link, (slave name, slave link) pairs up to an
    empty line, then per alternative its path, its priority and one line per slave, up to an
    empty line."""
    try:
        lines = read_utf8(admin_file, 1 << 20).split("\n")
    except UnreadableFile as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise CufileError(str(exc))
    try:
        mode, link, pos = lines[0], lines[1], 2
        if mode not in ("auto", "manual"):
            raise ValueError("mode %r" % mode)
        slaves = []
        while lines[pos] != "":
            slaves.append((lines[pos], lines[pos + 1]))
            pos += 2
        pos += 1
        choices = []
        while pos < len(lines) and lines[pos] != "":
            choices.append({"path": lines[pos], "priority": int(lines[pos + 1]),
                            "slaves": lines[pos + 2:pos + 2 + len(slaves)]})
            pos += 2 + len(slaves)
    except (IndexError, ValueError) as exc:
        raise CufileError("%s is not an update-alternatives file: %s" % (admin_file, exc))
    return {"mode": mode, "link": link, "slaves": slaves, "choices": choices}


def format_alternatives(admin):
    """The administrative file's text as update-alternatives writes it (choices by path)."""
    lines = [admin["mode"], admin["link"]]
    for name, link in admin["slaves"]:
        lines += [name, link]
    lines.append("")
    for choice in sorted(admin["choices"], key=lambda c: c["path"]):
        lines += [choice["path"], str(choice["priority"])]
        lines += (list(choice.get("slaves") or []) + [""] * len(admin["slaves"]))[:len(admin["slaves"])]
    lines.append("")
    return "\n".join(lines) + "\n"


def best_choice(choices, exclude=None):
    """The alternative auto mode selects (highest priority), optionally leaving one out."""
    pool = [c for c in choices if c["path"] != exclude]
    return max(pool, key=lambda c: c["priority"]) if pool else None
