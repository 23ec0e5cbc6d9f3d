# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which keys and values cufile.json may hold: the schema of the keys NVIDIA documents for
/etc/cufile.json and its validation.

The schema is the union of what NVIDIA documents: the GDS benchmarking guide's parameter table
and JSON schema (logging, profile, execution, properties, fs.*, block.*, denylist,
miscellaneous), the keys gdscheck -p prints, and the older names still found in vendor files
(``blacklist``, the legacy uniform bounce-buffer sizes). Validation names every offending key by
its dotted path: unknown keys (with the nearest known key), wrong types, values outside their
choices, IPv4 lists that are not addresses, and ``*_kb`` sizes that are not 4K-aligned.
"""
from __future__ import annotations

import difflib
import ipaddress

BOOL, INT, STR, KB = "bool", "int", "str", "kb"


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


def deprecations(config):
    """Warnings for old names that cuFile still reads (``blacklist`` -> ``denylist``)."""
    out = []
    for key, spec in SCHEMA.items():
        if isinstance(spec, dict) and spec.get("__deprecated__") and key in (config or {}):
            out.append("%s is the old name of %s" % (key, spec["__deprecated__"]))
    return out
