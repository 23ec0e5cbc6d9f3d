# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cufile.json: the schema of known keys, validation, a reader for NVIDIA's commented JSON, the
merge of our managed keys into a node's file (as a text edit that keeps its comments), the
toolkit's alternatives link, and the report checks.

The schema is the union of what NVIDIA documents for /etc/cufile.json: the GDS benchmarking
guide's parameter table and JSON schema (logging, profile, execution, properties, fs.*, block.*,
denylist, miscellaneous), the keys gdscheck -p prints, and the older names still found in vendor
files (``blacklist``, the legacy uniform bounce-buffer sizes). Validation names every offending
key by its dotted path: unknown keys (with the nearest known key), wrong types, values outside
their choices, IPv4 lists that are not addresses, and ``*_kb`` sizes that are not 4K-aligned.
"""
from __future__ import annotations

import copy
import difflib
import glob
import ipaddress
import json
import os
import re

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import backup_copy, write_atomic
from ansible_collections.gds.commission.plugins.module_utils.core.variables import errors, given_int, is_list, path_error

BOOL, INT, STR, KB = "bool", "int", "str", "kb"


class CufileError(Exception):
    """Malformed cufile.json text; the message names the line and column."""


def _list(item, **extra):
    spec = {"list": item}
    spec.update(extra)
    return spec


def _map(value_schema):
    return {"map": value_schema}


IPV4_LIST = _list(STR, ipv4=True)
_MOUNT_TABLE = _map({"rdma_dev_addr_list": IPV4_LIST})
_FS_RDMA = {"rdma_dev_addr_list": IPV4_LIST, "mount_table": _MOUNT_TABLE}
_DENYLIST = {"drivers": _list(STR), "devices": _list(STR), "mounts": _list(STR),
             "filesystems": _list(STR)}

SCHEMA = {
    "logging": {
        "dir": STR,
        "level": {"type": STR, "choices": ["NOTICE", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"],
                  "nocase": True},
        "max_file_size_mb": INT,
    },
    "profile": {
        "nvtx": BOOL,
        "cufile_stats": {"type": INT, "min": 0, "max": 3},
    },
    "execution": {
        "max_io_queue_depth": {"type": INT, "min": 1},
        "max_io_threads": {"type": INT, "min": 0},
        "parallel_io": BOOL,
        "min_io_threshold_size_kb": KB,
        "max_request_parallelism": {"type": INT, "min": 0},
    },
    "properties": {
        "max_direct_io_size_kb": KB,
        "max_device_cache_size_kb": KB,
        "per_buffer_cache_size_kb": KB,
        "max_device_pinned_mem_size_kb": KB,
        "gpu_bounce_buffer_slab_config": {"slab_size_kb": _list(KB), "slab_count": _list(INT)},
        "posix_pool_slab_size_kb": _list(KB),
        "posix_pool_slab_count": _list(INT),
        "use_poll_mode": BOOL,
        "poll_mode_max_size_kb": KB,
        "force_compat_mode": BOOL,
        "allow_compat_mode": BOOL,
        "use_pci_p2pdma": BOOL,
        "gds_rdma_write_support": BOOL,
        "io_batchsize": {"type": INT, "min": 1},
        "max_batch_io_size": {"type": INT, "min": 1},
        "max_batch_io_timeout_msecs": {"type": INT, "min": 0},
        "io_priority": {"type": STR, "choices": ["default", "low", "med", "high"]},
        "rdma_dev_addr_list": IPV4_LIST,
        "rdma_load_balancing_policy": {"type": STR, "choices": ["RoundRobin", "RoundRobinMaxMin"]},
        "rdma_dc_key": STR,
        "rdma_access_mask": STR,
        "rdma_dynamic_routing": BOOL,
        "rdma_dynamic_routing_order": _list(STR, choices=["GPU_MEM_NVLINKS", "GPU_MEM", "SYS_MEM",
                                                          "P2P"]),
        "skip_topology_detection": BOOL,
        "force_odirect_mode": BOOL,
        "prefer_iouring": BOOL,
        "allow_system_memory": BOOL,
        "stream_memops_bypass": BOOL,
    },
    "fs": {
        "generic": {"posix_unaligned_writes": BOOL},
        "lustre": dict(_FS_RDMA, posix_gds_min_kb=KB, use_pci_p2pdma=BOOL),
        "beegfs": dict(_FS_RDMA, posix_gds_min_kb=KB),
        "nfs": dict(_FS_RDMA, use_pci_p2pdma=BOOL),
        "gpfs": dict(_FS_RDMA, gds_write_support=BOOL, gds_async_support=BOOL),
        "weka": dict(_FS_RDMA, rdma_write_support=BOOL),
    },
    "block": {
        "nvme": {"use_pci_p2pdma": BOOL},
        "nvmeof": {"use_pci_p2pdma": BOOL},
        "raid": {"use_pci_p2pdma": BOOL},
    },
    "denylist": _DENYLIST,
    "blacklist": dict(_DENYLIST, __deprecated__="denylist"),
    "miscellaneous": {
        "api_check_aggressive": BOOL,
        "enable_static_routing": BOOL,
        "static_routing_filepath": STR,
    },
}


# --------------------------------------------------------------------------------------------
# Reading NVIDIA's JSON with comments
# --------------------------------------------------------------------------------------------
# Deeper than any cufile.json NVIDIA documents (fs.nfs.mount_table.<mount>.rdma_dev_addr_list is
# 6 levels) and far below what would exhaust Python's recursion in the parser.
MAX_DEPTH = 32


def _strip(text, max_depth=None):
    """(text without comments and trailing commas, index in ``text`` of the first ``{`` or ``[``
    nested deeper than ``max_depth``, or None)."""
    out, i, n = [], 0, len(text)
    in_string = False
    depth, too_deep = 0, None
    while i < n:
        char = text[i]
        if in_string:
            out.append(char)
            if char == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if char == '"':
                in_string = False
            i += 1
            continue
        if char == '"':
            in_string = True
            out.append(char)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end  # keep the newline: line numbers stay right
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            chunk = text[i:n if end < 0 else end + 2]
            out.append("\n" * chunk.count("\n"))
            i = n if end < 0 else end + 2
        else:
            if char in "{[":
                depth += 1
                if max_depth is not None and depth > max_depth and too_deep is None:
                    too_deep = i
            elif char in "}]":
                depth -= 1
            out.append(char)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out)), too_deep


def strip_comments(text):
    """Remove // and /* */ comments outside strings, and trailing commas before } or ]."""
    return _strip(text)[0]


def _line_column(text, pos):
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _last_wins(pairs):
    """An object whose repeated key has its later value, at its later place: what JSON parsers
    read, and the text left once the earlier one is removed (duplicate_keys, edit_text)."""
    out = {}
    for key, value in pairs:
        out.pop(key, None)
        out[key] = value
    return out


def loads(text, source="cufile.json"):
    """Parse cufile.json text (comments and trailing commas allowed; a repeated key counts with
    its later value). Raises CufileError naming ``source``, the line and the column."""
    stripped, deep_at = _strip(text, MAX_DEPTH)
    if deep_at is not None:
        raise CufileError("%s is nested deeper than %d levels at line %d column %d"
                          % ((source, MAX_DEPTH) + _line_column(text, deep_at)))
    try:
        data = json.loads(stripped, object_pairs_hook=_last_wins)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        col = getattr(exc, "colno", None)
        where = " at line %s column %s" % (line, col) if line else ""
        raise CufileError("%s is not valid JSON%s: %s" % (source, where, getattr(exc, "msg", exc)))
    except RecursionError:  # cannot happen below MAX_DEPTH; a message, never a traceback
        raise CufileError("%s is nested too deeply to be read" % source)
    if not isinstance(data, dict):
        raise CufileError("%s: the top level must be an object" % source)
    return data


def too_deep(value, limit=MAX_DEPTH, prefix=""):
    """The dotted path where ``value`` (objects and lists) nests deeper than ``limit``, or None.
    Walks without recursion: the value may be as deep as its sender made it."""
    todo = [(value, prefix, 1)]
    while todo:
        item, path, depth = todo.pop()
        if not isinstance(item, (dict, list)):
            continue
        if depth > limit:
            return path or "(top level)"
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, sub in pairs:
            sub_path = ("%s[%d]" % (path, key)) if isinstance(item, list) else (
                "%s.%s" % (path, key) if path else str(key))
            todo.append((sub, sub_path, depth + 1))
    return None


def dumps(config):
    """The strict JSON we write: 4-space indent, key order kept, newline at the end."""
    return json.dumps(config, indent=4, sort_keys=False) + "\n"


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------
def _is_section(spec):
    return isinstance(spec, dict) and "type" not in spec and "list" not in spec and "map" not in spec


def _known_paths(schema=None, prefix=""):
    paths = []
    for key, spec in (SCHEMA if schema is None else schema).items():
        if key.startswith("__"):
            continue
        path = prefix + key
        paths.append(path)
        if _is_section(spec):
            paths.extend(_known_paths(spec, path + "."))
    return paths


KNOWN_PATHS = _known_paths()


def suggest(path, siblings):
    """'did you mean X?' for an unknown key: a close sibling first, else a close known path."""
    key = path.rsplit(".", 1)[-1]
    close = difflib.get_close_matches(key, [s for s in siblings if not s.startswith("__")], n=1,
                                      cutoff=0.6)
    if close:
        return close[0]
    # the key exists elsewhere (allow_compat_mode at the top level) or a close full path
    leaf = [p for p in KNOWN_PATHS if p.rsplit(".", 1)[-1] == key]
    if leaf:
        return leaf[0]
    close = difflib.get_close_matches(path, KNOWN_PATHS, n=1, cutoff=0.75)
    return close[0] if close else None


def _type_name(value):
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__


def _check_scalar(path, value, spec, errors):
    if isinstance(spec, str):
        spec = {"type": spec}
    kind = spec["type"]
    if kind == BOOL:
        if not isinstance(value, bool):
            errors.append("%s: expected a boolean (true/false), got %s %r"
                          % (path, _type_name(value), value))
        return
    if kind in (INT, KB):
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append("%s: expected an integer%s, got %s %r" % (
                path, " (KB)" if kind == KB else "", _type_name(value), value))
            return
        if kind == KB:
            if value < 0:
                errors.append("%s: %d KB is negative" % (path, value))
            elif value % 4:
                errors.append("%s: %d KB is not 4K-aligned (use a multiple of 4, e.g. %d)"
                              % (path, value, (value // 4 + 1) * 4))
        if "min" in spec and value < spec["min"]:
            errors.append("%s: %d is below the minimum %d" % (path, value, spec["min"]))
        if "max" in spec and value > spec["max"]:
            errors.append("%s: %d is above the maximum %d" % (path, value, spec["max"]))
        return
    if kind == STR:
        if not isinstance(value, str):
            errors.append("%s: expected a string, got %s %r" % (path, _type_name(value), value))
            return
        choices = spec.get("choices")
        if choices:
            pool = [c.upper() for c in choices] if spec.get("nocase") else choices
            probe = value.upper() if spec.get("nocase") else value
            if probe not in pool:
                errors.append("%s: %r is not one of %s" % (path, value, ", ".join(choices)))


def _check(path, value, spec, errors, extra):
    if isinstance(spec, dict) and "list" in spec:
        if not isinstance(value, list):
            errors.append("%s: expected a list, got %s %r" % (path, _type_name(value), value))
            return
        for i, item in enumerate(value):
            item_path = "%s[%d]" % (path, i)
            _check_scalar(item_path, item, spec["list"], errors)
            if spec.get("choices") and isinstance(item, str) and item not in spec["choices"]:
                errors.append("%s: %r is not one of %s" % (item_path, item, ", ".join(spec["choices"])))
            if spec.get("ipv4") and isinstance(item, str):
                try:
                    ipaddress.IPv4Address(item)
                except ValueError:
                    errors.append("%s: %r is not an IPv4 address" % (item_path, item))
        return
    if isinstance(spec, dict) and "map" in spec:
        if not isinstance(value, dict):
            errors.append("%s: expected an object, got %s %r" % (path, _type_name(value), value))
            return
        for key, sub in value.items():
            _section("%s.%s" % (path, key), sub, spec["map"], errors, extra)
        return
    if _is_section(spec):
        _section(path, value, spec, errors, extra)
        return
    _check_scalar(path, value, spec, errors)


def _section(path, value, schema, errors, extra):
    if not isinstance(value, dict):
        errors.append("%s: expected an object, got %s %r" % (path, _type_name(value), value))
        return
    for key, sub in value.items():
        sub_path = "%s.%s" % (path, key) if path else key
        if key not in schema or key.startswith("__"):
            if sub_path in extra or any(sub_path.startswith(e + ".") for e in extra):
                continue
            hint = suggest(sub_path, list(schema))
            errors.append("%s: unknown key%s" % (
                sub_path, ", did you mean %s?" % hint if hint else ""))
            continue
        _check(sub_path, sub, schema[key], errors, extra)


def validate(config, extra_keys=()):
    """Every problem in ``config`` as a message that starts with the dotted key path."""
    errors = []
    if not isinstance(config, dict):
        return ["(top level): expected an object, got %s" % _type_name(config)]
    _section("", config, SCHEMA, errors, set(extra_keys or ()))
    return errors


# a key the schema does not know yet, by its dotted path (properties.some_new_knob)
DOTTED_KEY = re.compile(r"^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*$")


def validate_vars(values, host=None, hosts=()):
    """The cufile role's variables (gds_cufile_*): [message naming the variable and the value]."""
    path, alternative = values.get("gds_cufile_path"), values.get("gds_cufile_alternative_path")
    priority = given_int(values.get("gds_cufile_alternative_priority"))
    keys, addresses = values.get("gds_cufile_extra_keys", []), values.get("gds_cufile_rdma_addresses", {})
    bad_keys = [key for key in keys if not isinstance(key, str) or not DOTTED_KEY.match(key)] if is_list(keys) else [keys]
    bad_addresses = {nic: address for nic, address in addresses.items() if not (isinstance(address, str) and _ipv4(address))} \
        if isinstance(addresses, dict) else addresses
    return errors(
        path_error("gds_cufile_path", path), path_error("gds_cufile_alternative_path", alternative),
        "gds_cufile_path and gds_cufile_alternative_path must be two different paths, both are %s" % (path,)
        if path == alternative else None,
        None if priority is not None and priority > 0 else "gds_cufile_alternative_priority must be a positive "
        "integer, got %s" % (values.get("gds_cufile_alternative_priority"),),
        "gds_cufile_extra_keys: %s are not dotted cufile.json keys (e.g. properties.some_new_knob)" % (bad_keys,)
        if bad_keys else None,
        "gds_cufile_rdma_addresses: %s are not IPv4 addresses (a map of NIC to address)" % (bad_addresses,)
        if bad_addresses else None)


def deprecations(config):
    """Warnings for old names that cuFile still reads (``blacklist`` -> ``denylist``)."""
    out = []
    for key, spec in SCHEMA.items():
        if isinstance(spec, dict) and spec.get("__deprecated__") and key in (config or {}):
            out.append("%s is the old name of %s" % (key, spec["__deprecated__"]))
    return out


# --------------------------------------------------------------------------------------------
# Differences
# --------------------------------------------------------------------------------------------
def flatten(config, prefix=""):
    """{dotted.path: leaf value}; lists and empty objects are leaves."""
    flat = {}
    for key, value in (config or {}).items():
        path = prefix + key
        if isinstance(value, dict) and value:
            flat.update(flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def differences(actual, expected):
    """[{setting, expected, actual}] for every dotted key whose value differs (absent: None)."""
    left, right = flatten(actual), flatten(expected)
    items = []
    for path in sorted(set(left) | set(right)):
        if (path in left) != (path in right) or canonical(left[path]) != canonical(right[path]):
            items.append({"setting": path,
                          "expected": right[path] if path in right else "(absent)",
                          "actual": left[path] if path in left else "(absent)"})
    return items


def canonical(value):
    """A comparison key that tells 0 from false and ignores key order."""
    return json.dumps(value, sort_keys=True)


# --------------------------------------------------------------------------------------------
# Merging the managed keys into the file's existing content
# --------------------------------------------------------------------------------------------
def merge(base, managed):
    """``base`` with the ``managed`` keys set. Every other key keeps its value and its place;
    a managed key that is new goes to the end of its section. Objects merge key by key, any
    other value (lists included) replaces the old one."""
    out = copy.deepcopy(base) if isinstance(base, dict) else {}
    for key, value in (managed or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def key_order(config, prefix=""):
    """Every dotted key path in document order (sections before their members)."""
    paths = []
    for key, value in (config or {}).items():
        paths.append(prefix + key)
        if isinstance(value, dict):
            paths.extend(key_order(value, prefix + key + "."))
    return paths


def read_config(path):
    """(text, config) of an existing cufile.json. Raises CufileError naming the file."""
    try:
        with open(path, "r") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise CufileError("cannot read %s: %s" % (path, exc))
    return text, loads(text, path)


def text_format(text):
    """``strict`` (plain JSON) or ``commented`` (NVIDIA's JSON with comments)."""
    try:
        json.loads(text)
        return "strict"
    except ValueError:
        return "commented"


# --------------------------------------------------------------------------------------------
# Where cuFile reads its configuration: a plain file, a symlink, or the alternatives link
# --------------------------------------------------------------------------------------------
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
        with open(admin_file, "r") as handle:
            lines = handle.read().split("\n")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CufileError("cannot read %s: %s" % (admin_file, exc))
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


# --------------------------------------------------------------------------------------------
# Report checks
# --------------------------------------------------------------------------------------------
def report_checks(config, gds_mode, outcome, raid_devices=(), rdma_storage=False, rdma_nics=()):
    """The cufile checks for the report.

    ``outcome`` is ``{state, file, keys, backup, alternative, vendor}``: ``state`` one of
    ``in place``, ``written``, ``would change``; ``file`` the file that holds our keys;
    ``keys`` the dotted keys set; ``alternative`` a sentence about the alternatives link;
    ``duplicates`` the repeated keys found (duplicate_keys, with their ``file``)."""
    props = (config or {}).get("properties") or {}
    would = outcome["state"] == "would change"
    if outcome.get("keys"):
        parts = ["%s %s in %s" % ("would set" if would else "set", ", ".join(outcome["keys"]),
                                  outcome["file"])]
    elif outcome["state"] == "in place":
        parts = ["%s as configured" % outcome["file"]]
    else:  # e.g. our alternative created from a vendor file that already says the same
        parts = ["%s %s (no key differed from what cuFile read)" % (
            "would write" if would else "wrote", outcome["file"])]
    if outcome.get("alternative"):
        parts.append(outcome["alternative"])
    if outcome.get("vendor"):
        parts.append("vendor file %s left as it is" % outcome["vendor"])
    for dup in outcome.get("duplicates") or ():
        parts.append("key %s repeated in %s (lines %s): the later value %s" % (
            dup["key"], dup["file"], ", ".join(map(str, dup["lines"])),
            "would be kept" if would else "kept"))
    if outcome.get("backup"):
        parts.append("backup %s" % outcome["backup"])
    out = [check("cufile: configuration", "PASS", "valid cufile.json", outcome["state"],
                 "; ".join(parts))]

    compat_expected = gds_mode == "compat"
    compat = props.get("allow_compat_mode", False)
    out.append(check(
        "cufile: allow_compat_mode", "PASS" if compat == compat_expected else "WARN",
        compat_expected, compat,
        "gds_mode %s: %s" % (gds_mode, "compat mode is the plan here" if compat_expected
                             else "a POSIX fallback must fail loudly while commissioning")))
    p2p_expected = gds_mode == "p2pdma"
    p2p = props.get("use_pci_p2pdma", False)
    out.append(check("cufile: use_pci_p2pdma", "PASS" if p2p == p2p_expected else "FAIL",
                     p2p_expected, p2p, "gds_mode %s" % gds_mode))
    if p2p and raid_devices:
        out.append(check("cufile: P2PDMA with md RAID", "FAIL", "no md RAID", ",".join(raid_devices),
                         "NVIDIA does not support GDS P2PDMA on md RAID"))
    if rdma_storage:
        missing = [str(n.get("nic")) for n in rdma_nics if not n.get("address")]
        listed = props.get("rdma_dev_addr_list") or []
        listed = listed if isinstance(listed, list) else None
        out.append(check(
            "cufile: rdma_dev_addr_list", "WARN" if missing or not listed else "PASS",
            ",".join(str(n.get("nic")) for n in rdma_nics), ",".join(map(str, listed or [])),
            "no IPv4 address for %s (set gds_cufile_rdma_addresses)" % ",".join(missing)
            if missing else None if listed is not None else "rdma_dev_addr_list is not a list",
            inputs={"the NICs' addresses": [n.get("address") for n in rdma_nics], "rdma_dev_addr_list": listed}))
    return out


# --------------------------------------------------------------------------------------------
# Editing the text in place: comments, layout and untouched values stay as they were
# --------------------------------------------------------------------------------------------
class _Scanner(object):
    """Spans of the values of a cufile.json text that loads() accepted (comments allowed)."""

    def __init__(self, text):
        self.text, self.pos = text, 0

    def _skip(self):
        text, n = self.text, len(self.text)
        while self.pos < n:
            if text[self.pos] in " \t\r\n":
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = n if end < 0 else end
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                self.pos = n if end < 0 else end + 2
            else:
                return

    def _string(self):
        start, text = self.pos, self.text
        self.pos += 1
        while text[self.pos] != '"':
            self.pos += 2 if text[self.pos] == "\\" else 1
        self.pos += 1
        return json.loads(text[start:self.pos])

    def value(self):
        self._skip()
        start, char = self.pos, self.text[self.pos]
        if char == "{":
            return self._object()
        if char in "[":
            depth = 0
            while True:  # lists are leaves: only their span matters
                char = self.text[self.pos]
                if char == '"':
                    self._string()
                    continue
                if char in "/" and self.text[self.pos + 1] in "/*":
                    self._skip()
                    continue
                depth += {"[": 1, "]": -1}.get(char, 0)
                self.pos += 1
                if depth == 0:
                    break
        elif char == '"':
            self._string()
        else:
            while self.pos < len(self.text) and self.text[self.pos] not in ",]} \t\r\n/":
                self.pos += 1
        return {"kind": "value", "start": start, "end": self.pos}

    def _object(self):
        node = {"kind": "object", "start": self.pos, "members": []}
        self.pos += 1
        while True:
            self._skip()
            if self.text[self.pos] == "}":
                node["close"] = self.pos
                self.pos += 1
                node["end"] = self.pos
                return node
            key_start = self.pos
            key = self._string()
            self._skip()
            self.pos += 1  # the colon
            member = {"key": key, "key_start": key_start, "value": self.value(), "comma": False}
            node["members"].append(member)
            self._skip()
            if self.text[self.pos] == ",":
                member["comma"] = True
                member["comma_at"] = self.pos
                self.pos += 1


def _indent_at(text, pos):
    line = text.rfind("\n", 0, pos) + 1
    return re.match(r"[ \t]*", text[line:]).group(0)


def _dump_at(value, indent):
    """JSON for a value written at ``indent``: objects one key a line, lists on one line."""
    if isinstance(value, dict) and value:
        inner = indent + "    "
        return "{\n%s\n%s}" % (",\n".join("%s%s: %s" % (inner, json.dumps(k), _dump_at(v, inner))
                                          for k, v in value.items()), indent)
    return json.dumps(value)


def _removal(text, member):
    """The edit that removes a member followed by a comma, with its line when it has one."""
    start, end = member["key_start"], member["comma_at"] + 1
    line, rest = text.rfind("\n", 0, start) + 1, text.find("\n", end)
    if not text[line:start].strip() and rest >= 0 and not text[end:rest].strip():
        return (line, rest + 1, "")  # the member's whole line
    while end < len(text) and text[end] in " \t":
        end += 1
    return (start, end, "")


def _edits(text, node, current, wanted, out):
    members = {}
    for member in node["members"]:
        earlier = members.get(member["key"])
        if earlier is not None:  # a repeated key: the later counts, as for json; the earlier goes
            out.append(_removal(text, earlier))
        members[member["key"]] = member
    for key, value in wanted.items():
        if key not in current:
            continue
        member = members[key]
        if isinstance(value, dict) and isinstance(current[key], dict):
            _edits(text, member["value"], current[key], value, out)
        elif canonical(value) != canonical(current[key]):
            out.append((member["value"]["start"], member["value"]["end"],
                        _dump_at(value, _indent_at(text, member["key_start"]))))
    new = [key for key in wanted if key not in current]
    if not new:
        return
    if node["members"]:
        last = node["members"][-1]
        indent = _indent_at(text, last["key_start"])
        if not last["comma"]:
            out.append((last["value"]["end"], last["value"]["end"], ","))
    else:
        indent = _indent_at(text, node["start"]) + "    "
    at = node["close"]
    while at > node["start"] + 1 and text[at - 1] in " \t\r\n":
        at -= 1
    added = ",".join("\n%s%s: %s" % (indent, json.dumps(key), _dump_at(wanted[key], indent))
                     for key in new)
    if at == node["start"] + 1:
        added += "\n" + _indent_at(text, node["start"])
    out.append((at, at, added))


def edit_text(text, current, wanted):
    """``text`` (which parses to ``current``) changed to say ``wanted``, keeping its comments,
    layout and untouched values; None when the edit cannot be made (then write dumps())."""
    try:
        root = _Scanner(text).value()
        if root["kind"] != "object":
            return None
        out = []
        _edits(text, root, current, wanted, out)
    except (IndexError, ValueError, KeyError):
        return None
    # from the end backwards; at one position the later edit first, so a comma lands before
    # the members added after it
    for dummy, (start, end, new) in sorted(enumerate(out), key=lambda e: (e[1][0], e[1][1], e[0]),
                                           reverse=True):
        text = text[:start] + new + text[end:]
    try:  # the edit must say exactly what we want, in the same key order, each key once
        if json.dumps(loads(text)) != json.dumps(wanted) or duplicate_keys(text):
            return None
    except CufileError:
        return None
    return text


def duplicate_keys(text):
    """[{key, lines}] for every key an object of a cufile.json text holds more than once: its
    dotted path and the lines of each occurrence. The later value counts (loads reads it so, as
    JSON parsers do). Only for text that loads() accepted; [] when it cannot be scanned."""
    try:
        root = _Scanner(text).value()
    except (IndexError, ValueError):
        return []
    out, todo = [], [(root, "")] if root["kind"] == "object" else []
    while todo:
        node, prefix = todo.pop(0)
        where = {}
        for member in node["members"]:
            where.setdefault(member["key"], []).append(_line_column(text, member["key_start"])[0])
            if member["value"]["kind"] == "object":
                todo.append((member["value"], prefix + member["key"] + "."))
        out.extend({"key": prefix + key, "lines": lines} for key, lines in where.items()
                   if len(lines) > 1)
    return sorted(out, key=lambda d: d["lines"])


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------
def _atomic_symlink(path, target):
    tmp = "%s.gds-commission.%d" % (path, os.getpid())
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, path)


def _put(paths, result, path, text, mode, write, backup):
    """Write ``text`` to ``path`` (the old file backed up first when ``backup``), or, with the
    content unchanged, only put its mode right."""
    paths.guard(path)
    if write:
        if backup:
            result["backup_file"] = backup_copy(path)
        write_atomic(path, text, mode)
    elif _mode_differs(path, mode):
        os.chmod(path, mode)


def _mode_differs(path, mode):
    return os.path.exists(path) and (os.stat(path).st_mode & 0o7777) != mode


def parse_mode(value):
    """0644, '0644' or '644' as an integer file mode."""
    try:
        return value if isinstance(value, int) else int(str(value), 8)
    except ValueError:
        raise CufileError("mode %r is not an octal file mode such as 0644" % (value,))


def _duplicates(paths, files):
    """duplicate_keys() of each distinct (file, text), the file as the node sees it."""
    out, seen = [], set()
    for local, text in files:
        if local in seen or not text:
            continue
        seen.add(local)
        out.extend(dict(d, file=paths.node(local)) for d in duplicate_keys(text))
    return out


def _duplicate_drift(path, duplicates):
    return [{"setting": "%s: %s" % (path, d["key"]), "expected": "one value",
             "actual": "%d values (lines %s)" % (len(d["lines"]), ", ".join(map(str, d["lines"])))}
            for d in duplicates]


def configure(path, managed, root="", alternative_path="/etc/gds-commission/cufile.json",
              priority=1000, register_alternative=False, backup=True, mode=0o644,
              check_mode=False):
    """Merge the ``managed`` keys into the cuFile configuration that ``path`` holds.

    ``path`` may be a plain file (edited in place, atomically, with a backup), absent (created),
    a symlink (its final target is edited in place) or the alternatives link that libcufile's
    packages install (``path -> <root>/etc/alternatives/NAME -> vendor file``): then the vendor's
    file is left alone, the merged content goes to ``alternative_path`` and that file is the
    alternative to select, at ``priority``. ``register_alternative`` selects it here (the link
    and the administrative file update-alternatives would write, for a simulated root);
    otherwise the caller runs update-alternatives. ``path`` and ``alternative_path`` are below
    ``root`` or node paths (then taken below it); nothing outside ``root`` is read or written.
    A key repeated in a file counts with its later value (as JSON parsers read it) and the file
    written keeps only that one. Returns the module result without checks; raises CufileError
    for a malformed file or a dangling link, naming it."""
    paths = NodePaths(root)
    where = paths.resolve_parent(path)
    if os.path.islink(where):
        first = paths.readlink(where)
        if os.path.dirname(first) == paths.local("/etc/alternatives"):
            return _via_alternatives(paths, path, where, paths.resolve_parent(first), managed,
                                     paths.resolve(alternative_path), priority,
                                     register_alternative, backup, mode, check_mode)
        target = paths.resolve(where)
        if not os.path.exists(target):
            raise CufileError("%s is a symlink to %s, which does not exist" % (path, paths.node(target)))
        layout = "symlink"
    else:
        target = where
        layout = "file" if os.path.exists(where) else "absent"

    text, current = "", None
    if layout != "absent":
        text, current = read_config(target)
    desired = merge(current, managed)
    after = (edit_text(text, current, desired) if current is not None else None) or dumps(desired)
    items = differences(current or {}, desired)
    duplicates = _duplicates(paths, [(target, text)])
    write = current is None or canonical(current) != canonical(desired) or bool(duplicates)
    result = {"path": path, "layout": layout, "file": target, "changed": False, "config": desired,
              "previous_format": text_format(text) if current is not None else "absent",
              "keys": [i["setting"] for i in items], "duplicates": duplicates,
              "drift": ([dict(i, setting="%s: %s" % (path, i["setting"])) for i in items]
                        + _duplicate_drift(path, duplicates))}
    if write:
        result["diff"] = {"before": text, "after": after, "before_header": target,
                          "after_header": target}
    result["changed"] = write or _mode_differs(target, mode)
    if check_mode or not result["changed"]:
        return result
    _put(paths, result, target, after, mode, write, backup and current is not None)
    return result


def _via_alternatives(paths, path, link, first, managed, ours, priority, register, backup, mode,
                      check_mode):
    name = os.path.basename(first)
    admin_file = paths.resolve(paths.local("/var/lib/dpkg/alternatives/" + name))
    admin = read_alternatives(admin_file)
    ours_node, link_node = paths.node(ours), paths.node(link)
    selected = paths.node(paths.readlink(first)) if os.path.islink(first) else None
    current_file = paths.resolve(link)

    # the base is the vendor's file (the best alternative that is not ours), so a newer toolkit's
    # keys reach our file on the next run; without an administrative file, what the link shows.
    # A vendor file that is gone is an error: a file of our keys alone would drop all of NVIDIA's
    vendor = best_choice(admin["choices"], exclude=ours_node) if admin else None
    if vendor:
        base_file = paths.resolve(paths.local(vendor["path"]))
        if not os.path.exists(base_file):
            raise CufileError(
                "%s: the cufile.json alternative %s does not exist (a dangling alternative): "
                "reinstall its libcufile package or remove it with update-alternatives --remove "
                "%s %s; nothing was changed" % (paths.node(admin_file), vendor["path"], name,
                                                vendor["path"]))
    else:
        base_file = current_file if current_file != ours else None
        if base_file and not os.path.exists(base_file):
            raise CufileError(
                "%s -> %s: %s does not exist (a dangling alternatives link) and %s lists no "
                "other cufile.json; nothing was changed" % (link_node, paths.node(first),
                                                            paths.node(base_file),
                                                            paths.node(admin_file)))
    base_text, base = "", {}
    if base_file:
        base_text, base = read_config(base_file)
    text, current = "", None
    if os.path.exists(current_file):
        text, current = read_config(current_file)
    ours_text, ours_config = read_config(ours) if os.path.exists(ours) else ("", None)

    desired = merge(base, managed)
    # our file starts from the vendor's text: NVIDIA's comments stay readable in it
    after = (edit_text(base_text, base, desired) if base_text else None) or dumps(desired)
    items = differences(current or {}, desired)
    duplicates = _duplicates(paths, [(base_file, base_text), (current_file, text), (ours, ours_text)])
    ours_duplicates = [d for d in duplicates if d["file"] == ours_node]
    write = ours_config is None or canonical(ours_config) != canonical(desired) or bool(ours_duplicates)

    choices = [c for c in (admin["choices"] if admin else []) if c["path"] != ours_node]
    choices.append({"path": ours_node, "priority": priority, "slaves": []})
    winner = best_choice(choices)
    if winner["path"] != ours_node or [c["priority"] for c in choices].count(priority) > 1:
        raise CufileError("%s: the alternative %s has priority %d, not below %d: raise "
                          "gds_cufile_alternative_priority" % (admin_file, winner["path"],
                                                               winner["priority"], priority))
    wanted_admin = {"mode": "auto", "link": link_node, "slaves": admin["slaves"] if admin else [],
                    "choices": choices}
    registered = (admin is not None and admin["mode"] == "auto" and admin["link"] == link_node
                  and any(c["path"] == ours_node and c["priority"] == priority
                          for c in admin["choices"]))
    link_ok = registered and selected == ours_node

    drift = [dict(i, setting="%s: %s" % (path, i["setting"])) for i in items]
    drift += _duplicate_drift(ours_node, ours_duplicates)
    if not link_ok:
        drift.append({"setting": "%s: alternative" % path, "expected": ours_node,
                      "actual": selected or "(none)"})
    result = {"path": path, "layout": "alternatives", "file": ours, "changed": False,
              "config": desired,
              "previous_format": text_format(text) if current is not None else "absent",
              "keys": [i["setting"] for i in items], "duplicates": duplicates, "drift": drift,
              "alternative": {"name": name, "link": link_node, "path": ours_node,
                              "priority": priority, "selected": link_ok,
                              "vendor": vendor["path"] if vendor else None}}
    if write or not link_ok:
        result["diff"] = {"before": text, "after": after,
                          "before_header": paths.node(current_file), "after_header": ours_node}
    mode_fix = not write and _mode_differs(ours, mode)
    result["changed"] = write or mode_fix or (not link_ok and (register or check_mode))
    if check_mode or not result["changed"]:
        return result
    _put(paths, result, ours, after, mode, write, backup and ours_config is not None)
    if register and not link_ok:
        write_atomic(paths.guard(admin_file), format_alternatives(wanted_admin), 0o644)
        _atomic_symlink(paths.guard(first), ours_node)
        result["alternative"]["selected"] = True
    return result


def commission(params, check_mode=False):
    """The module's work: validate the managed keys, merge and write them, and the checks.

    Returns ``(result, warnings)``; raises CufileError with a message that names the file, the
    line and column, or every offending key."""
    managed = params["config"]
    deep = too_deep(managed)
    if deep is not None:
        raise CufileError("config: %s is nested deeper than %d levels" % (deep, MAX_DEPTH))
    root = params.get("root") or ""
    remote = None
    if params.get("netfs_mounts"):
        schema = remote_schema(root, [NodePaths(root).resolve(params["path"])])
        extra, listed, notes = remote_fs_keys(params["netfs_mounts"], schema)
        # the role's keys win, except that both address lists count
        addresses = list(dict.fromkeys(
            list(((managed.get("properties") or {}).get("rdma_dev_addr_list")) or [])
            + list(((extra.get("properties") or {}).get("rdma_dev_addr_list")) or [])))
        managed = merge(extra, managed)
        if addresses:
            managed.setdefault("properties", {})["rdma_dev_addr_list"] = addresses
        remote = {"schema": schema, "mounts": listed, "notes": notes}
    errors = validate(managed, params.get("extra_keys") or ())
    if errors:
        raise CufileError("invalid cuFile configuration: %s" % "; ".join(errors))
    result = configure(params["path"], managed, root=root,
                       alternative_path=params["alternative_path"],
                       priority=params["alternative_priority"],
                       register_alternative=params["register_alternative"],
                       backup=params["backup"], mode=parse_mode(params["mode"]),
                       check_mode=check_mode)
    warnings = deprecations(result["config"])
    paths = NodePaths(root)
    for dup in result["duplicates"]:
        warnings.append("%s: key %s appears on lines %s; the value on line %d counts (the later, "
                        "as JSON parsers read it) and the file written, %s, keeps only that one"
                        % (dup["file"], dup["key"], ", ".join(map(str, dup["lines"])),
                           dup["lines"][-1], paths.node(result["file"])))
    alternative = result.get("alternative")
    sentence = None
    if alternative:
        done = alternative["selected"] or (not check_mode and not params["register_alternative"])
        sentence = "%s for %s through update-alternatives (%s, priority %d, auto mode)" % (
            "selected" if done else "would be selected", alternative["link"], alternative["name"],
            alternative["priority"])
    state = "in place"
    if result["changed"]:
        state = "would change" if check_mode else "written"
    outcome = {"state": state, "file": paths.node(result["file"]), "keys": result["keys"],
               "alternative": sentence,
               "vendor": alternative.get("vendor") if alternative else None,
               "backup": paths.node(result["backup_file"]) if result.get("backup_file") else None,
               "duplicates": result["duplicates"]}
    result["checks"] = report_checks(result["config"], params.get("gds_mode") or "nvfs", outcome,
                                     raid_devices=params.get("raid_devices") or (),
                                     rdma_storage=params.get("rdma_storage", False),
                                     rdma_nics=params.get("rdma_nics") or ())
    result["gds_version"] = remote["schema"]["version"] if remote else gds_version(root)[0]
    if remote:
        policy = (managed.get("properties") or {}).get("rdma_load_balancing_policy")
        result["checks"].append(remote_fs_check(remote["schema"], remote["mounts"], remote["notes"],
                                                policy))
        result["remote_fs"] = remote
    return result, warnings


# --------------------------------------------------------------------------------------------
# Remote file systems: rdma_dev_addr_list and fs.<type> sections from the network mounts
# --------------------------------------------------------------------------------------------
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
            with open(path, "r") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            continue
        keys = {section: section_keys(text, section) for section in BUILTIN_REMOTE_KEYS}
        if keys["properties"] is None or keys.get("fs.nfs") is None and keys.get("fs.lustre") is None:
            continue  # not a cufile.json with the sections we need
        return {"version": version, "library": library, "source": paths.node(paths.resolve(path)),
                "keys": {s: sorted((k or set()) & BUILTIN_REMOTE_KEYS[s]) for s, k in keys.items()}}
    return {"version": version, "library": library, "source": "documentation",
            "keys": {s: sorted(k) for s, k in BUILTIN_REMOTE_KEYS.items()}}


def _ipv4(text):
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
        if not _ipv4(address):
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
