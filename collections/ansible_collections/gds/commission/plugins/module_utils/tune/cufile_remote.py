# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Remote file systems in cufile.json: the RDMA addresses of the network mounts' NICs in
properties.rdma_dev_addr_list and the fs.<type> sections, with the key names of the installed
GDS version (read from its toolkit's cufile.json, else the documented ones)."""
from __future__ import annotations

import glob
import ipaddress
import os
import re

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, read_utf8
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile_alternatives import NodePaths
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile_text import MAX_BYTES

REMOTE_FS = ("nfs", "lustre", "weka", "gpfs", "beegfs")
# Where the node has no cufile.json of its toolkit to read the key names from: what the GDS
# documentation lists per file system.
BUILTIN_REMOTE_KEYS = {
    "properties": {"rdma_dev_addr_list", "rdma_load_balancing_policy"},
    "fs.nfs": {"rdma_dev_addr_list", "mount_table"},
    "fs.lustre": {"rdma_dev_addr_list", "mount_table"},
    "fs.beegfs": {"rdma_dev_addr_list", "mount_table"},
    "fs.weka": {"rdma_dev_addr_list", "mount_table"},
    "fs.gpfs": {"rdma_dev_addr_list"},
}
# libcufile's file name carries the GDS version (libcufile.so.1.15.1 in CUDA 13.0); the soname
# libcufile.so.0 does not.
_LIBCUFILE = re.compile(r"libcufile\.so\.(\d+(?:\.\d+)+)$")
_LIB_GLOBS = ("usr/local/cuda/targets/*/lib", "usr/local/cuda/lib64", "usr/local/cuda-*/targets/*/lib",
              "usr/local/cuda-*/lib64", "usr/lib/*-linux-gnu", "usr/lib64")
_TOOLKIT_CUFILE = ("usr/local/cuda/gds/cufile.json",)


def gds_version(root=""):
    """(version, node path) of the installed libcufile, from its file name; (None, None) when
    none is installed. /usr/local/cuda (the toolkit selected) wins over other toolkits."""
    paths = NodePaths(root)
    for pattern in _LIB_GLOBS:
        found = []
        for path in glob.glob(os.path.join(paths.local("/"), pattern, "libcufile.so.*")):
            match = _LIBCUFILE.search(path)
            if match:
                found.append((tuple(int(x) for x in match.group(1).split(".")), match.group(1), path))
        if found:
            best = max(found)
            return best[1], paths.node(best[2])
    return None, None


def _matching_brace(text, start):
    depth = 0
    for pos in range(start, len(text)):
        if text[pos] == "{":
            depth += 1
        elif text[pos] == "}":
            depth -= 1
            if depth == 0:
                return pos
    return len(text)


def section_keys(text, dotted):
    """The key names that a cufile.json text gives section ``dotted`` (``fs.nfs``), commented
    ones included: NVIDIA's file lists the optional keys of its version as ``//"key" : ...``.
    None when the text has no such section."""
    start, end = 0, len(text)
    for name in dotted.split("."):
        match = re.compile(r'"%s"\s*:\s*\{' % re.escape(name)).search(text, start, end)
        if not match:
            return None
        start = match.end() - 1
        end = _matching_brace(text, start)
        start += 1
    keys, depth = set(), 0
    for match in re.finditer(r'[{}]|"([A-Za-z0-9_]+)"\s*:', text[start:end]):
        if match.group(0) == "{":
            depth += 1
        elif match.group(0) == "}":
            depth -= 1
        elif depth == 0:
            keys.add(match.group(1))
    return keys


def remote_schema(root, candidates):
    """{version, library, source, keys: {section: [key]}}: the key names of the installed GDS
    version, read from its toolkit's cufile.json (or the node's, ``candidates`` being local
    paths), else the documented ones (``source`` ``documentation``)."""
    version, library = gds_version(root)
    paths = NodePaths(root)
    texts = [paths.resolve(paths.local("/" + rel)) for rel in _TOOLKIT_CUFILE] + list(candidates)
    for path in texts:
        try:
            text = read_utf8(path, MAX_BYTES)
        except UnreadableFile:
            continue
        keys = {section: section_keys(text, section) for section in BUILTIN_REMOTE_KEYS}
        if keys["properties"] is None or keys.get("fs.nfs") is None and keys.get("fs.lustre") is None:
            continue  # not a cufile.json with the sections we need
        return {"version": version, "library": library, "source": paths.node(paths.resolve(path)),
                "keys": {s: sorted((k or set()) & BUILTIN_REMOTE_KEYS[s]) for s, k in keys.items()}}
    return {"version": version, "library": library, "source": "documentation",
            "keys": {s: sorted(k) for s, k in BUILTIN_REMOTE_KEYS.items()}}


def is_ipv4(text):
    try:
        return isinstance(ipaddress.ip_address(text), ipaddress.IPv4Address)
    except (TypeError, ValueError):
        return False


def remote_fs_keys(mounts, schema):
    """(managed keys, listed, notes) for the network mounts cuFile reaches over RDMA: the client
    address of each mount's NIC in properties.rdma_dev_addr_list and, per file system, in
    ``mount_table`` (per mount) where the version has it, else in its ``rdma_dev_addr_list``."""
    keys = {s: set(k) for s, k in schema["keys"].items()}
    notes, listed, addresses, per_fs = [], [], [], {}
    for mount in mounts or []:
        where = mount.get("mountpoint")
        fs = mount.get("fs")
        if fs not in REMOTE_FS:
            notes.append("%s: file system %r has no cufile.json section" % (where, fs))
            continue
        if not mount.get("rdma"):
            notes.append("%s: %s transport, not RDMA" % (where, mount.get("transport") or "unknown"))
            continue
        address = mount.get("client_address")
        if not is_ipv4(address):
            notes.append("%s: no IPv4 client address on %s (cuFile takes IPv4 only)"
                         % (where, mount.get("netdev") or "its interface"))
            continue
        per_fs.setdefault(fs, []).append((where, address))
        listed.append({"mountpoint": where, "fs": fs, "nic": mount.get("nic"), "address": address})
        if address not in addresses:
            addresses.append(address)
    config = {}
    if addresses and "rdma_dev_addr_list" in keys.get("properties", ()):
        config["properties"] = {"rdma_dev_addr_list": addresses}
    for fs, rows in sorted(per_fs.items()):
        section_names = keys.get("fs." + fs, set())
        section = {}
        if "mount_table" in section_names:
            table = {}
            for where, address in rows:
                entry = table.setdefault(where, {"rdma_dev_addr_list": []})
                if address not in entry["rdma_dev_addr_list"]:
                    entry["rdma_dev_addr_list"].append(address)
            section["mount_table"] = table
        elif "rdma_dev_addr_list" in section_names:
            section["rdma_dev_addr_list"] = list(dict.fromkeys(a for dummy, a in rows))
        else:
            notes.append("fs.%s: this GDS version's cufile.json has no rdma_dev_addr_list or "
                         "mount_table; the addresses are in properties.rdma_dev_addr_list only" % fs)
        if section:
            config.setdefault("fs", {})[fs] = section
    return config, listed, notes


def remote_fs_check(schema, listed, notes, policy):
    """The ``cufile: remote file systems`` check."""
    where = "libcufile %s" % schema["version"] if schema["version"] else "no libcufile found"
    detail = ["key names of %s (from %s)" % (where, schema["source"])]
    verdict = "PASS"
    if policy is not None and "rdma_load_balancing_policy" not in schema["keys"].get("properties", ()):
        verdict = "WARN"
        detail.append("this version does not know properties.rdma_load_balancing_policy")
    if notes:
        detail.append("; ".join(notes))
    listed = [m if isinstance(m, dict) else {} for m in listed] if isinstance(listed, list) else None
    return check("cufile: remote file systems", verdict,
                 "RDMA mounts' NIC addresses in cufile.json",
                 ", ".join("%s %s" % (m.get("mountpoint"), m.get("address")) for m in listed or []) or "none",
                 "; ".join(detail), inputs={"mounts": listed, "addresses": [m.get("address") for m in listed or []]})
