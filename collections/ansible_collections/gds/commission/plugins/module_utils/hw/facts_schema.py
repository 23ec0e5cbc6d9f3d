# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The facts every later step reads, described as a whole: a JSON Schema (draft 2020-12) of
``ansible_facts['gds_topology']`` (module gds_topology, hw/affinity.discover) and
``ansible_facts['gds_platform']`` (module gds_platform, hw/platform.collect).

Every object lists all its keys (``additionalProperties: false``): a key a module adds or drops
without this file fails tests/unit/test_facts_schema.py, which validates both modules' output on
every fixture node. A Python file, not a .json beside it, so that modules and the report (whose
modules carry only Python files) read it; ``python3 -m`` this module prints it as JSON
(docs/modules.md#the-facts-schema).
"""
from __future__ import annotations

import json

from ansible_collections.gds.commission.plugins.module_utils.hw.pci import BDF_PATTERN, LINK_CLASSES, PORT_NAMES

SCHEMA_ID = "https://gds-commission.invalid/schemas/gds_facts.schema.json"


def _kind(kind, description, null=False, **extra):
    out = {"type": [kind, "null"] if null else kind, "description": description}
    out.update(extra)
    return out


def _object(description, properties, optional=(), null=False):
    """An object with exactly these keys; all required but ``optional``."""
    return {"type": ["object", "null"] if null else "object", "description": description,
            "properties": properties, "required": sorted(k for k in properties if k not in optional),
            "additionalProperties": False}


def _map(description, values, null=False):
    """An object whose keys are data (names), each value of one schema."""
    return {"type": ["object", "null"] if null else "object", "description": description,
            "additionalProperties": values}


def _list(description, items, null=False):
    return {"type": ["array", "null"] if null else "array", "description": description, "items": items}


def _bdf(description, null=False):
    return _kind("string", description, null, pattern=BDF_PATTERN)


_NAME = {"type": "string"}
_CLASS = {"enum": list(LINK_CLASSES)}
_MATRIX_CLASS = {"enum": list(LINK_CLASSES) + ["X"]}
_NUMA = _kind("integer", "NUMA node of the PCI function (-1: the firmware gives none)", minimum=-1)

TOPOLOGY = _object("The PCI model of the node (module gds_topology).", {
    "gpus": _list("NVIDIA GPUs (not NVSwitches, not SR-IOV virtual functions), by index.", _object("A GPU.", {
        "index": _kind("integer", "NVML's index when NVML was used, else the rank in PCI bus order", minimum=0),
        "bdf": _bdf("PCI address"),
        "numa_node": _NUMA,
        "device_id": _kind("string", "PCI device id, 0x%04x", pattern="^0x[0-9a-f]{4}$"),
        "switch": _bdf("upstream port of the nearest PCIe switch above it; null when none", null=True),
        "driver": _kind("string", "kernel driver bound to it; null when none", null=True),
        "nics": _list("every RDMA NIC by link class to this GPU, best first (then by name)", _NAME),
        "nic_link": {"anyOf": [_CLASS, {"type": "null"}], "description": "link class of the first of nics; null without NICs"},
        "name": _kind("string", "product name from NVML (only when NVML was used)"),
    }, optional=("name",))),
    "nvme": _list("NVMe namespaces on PCI controllers.", _object("An NVMe namespace (a drive).", {
        "name": _kind("string", "block device (nvme0n1)"),
        "controller": _kind("string", "first controller (nvme0)"),
        "controllers": _list("every controller the namespace is reached through", _NAME),
        "bdf": _bdf("PCI address of the first controller"),
        "numa_node": _NUMA,
        "model": _kind("string", "controller model; null when unreadable", null=True),
        "size_bytes": _kind("integer", "size; null when unreadable", null=True, minimum=0),
        "system": _kind("boolean", "holds the running OS (never in a group, never touched)"),
        "switch": _bdf("switch upstream port above the first controller; null when none", null=True),
        "paths": _list("one entry per controller, two for a dual-port drive", _object("A path to the drive.", {
            "name": _kind("string", "path disk (nvme0c0n1) or the namespace itself"),
            "controller": _kind("string", "controller"),
            "bdf": _bdf("PCI address of that controller"),
            "switch": _bdf("switch upstream port above it; null when none", null=True),
        })),
    })),
    "nics": _list("RDMA devices of /sys/class/infiniband (SR-IOV virtual functions not listed).", _object("An RDMA NIC.", {
        "name": _kind("string", "RDMA device (mlx5_0)"),
        "netdev": _kind("string", "the first of netdevs; null without one", null=True),
        "netdevs": _list("the ports' netdevs, then the PCI function's others", _NAME),
        "bdf": _bdf("PCI function (a software device's: that of its netdev)"),
        "numa_node": _NUMA,
        "switch": _bdf("switch upstream port above it; null when none", null=True),
        "vfs": _kind("integer", "SR-IOV virtual functions enabled (0 without SR-IOV)", minimum=0),
        "software": _kind("boolean", "rxe or siw: no PCI function of its own"),
        "fw_ver": _kind("string", "firmware version; null when unreadable", null=True),
        "ports": _list("one entry per ports/<n>/ directory", _object("A port.", {
            "port": _kind("integer", "port number", minimum=0),
            "state": _kind("string", "ACTIVE, DOWN ... (without the kernel's number); null when unreadable", null=True),
            "phys_state": _kind("string", "LinkUp, Disabled ...; null when unreadable", null=True),
            "rate_gbps": _kind("number", "rate in Gb/s; null when the rate file reads no rate", null=True),
            "rate": _kind("string", "the rate file (400 Gb/sec (4X NDR)); null when unreadable", null=True),
            "link_layer": _kind("string", "InfiniBand or Ethernet; null when unreadable", null=True),
            "netdev": _kind("string", "netdev serving the port; null when none", null=True),
            "gid": _kind("string", "GID 0 (only when set)"),
        }, optional=("gid",))),
    })),
    "disks": _list("Whole disks that are no PCIe NVMe namespace, each with the PCI function its data crosses.",
                   _object("A disk.", {
                       "name": _kind("string", "block device (vda, sda, nvme1n1 over fabrics)"),
                       "kind": {"enum": ["virtio", "ata", "usb", "scsi", "other", "fabrics"],
                                "description": "the layer between the disk and its PCI function"},
                       "bdf": _bdf("the PCI function its data crosses; null when none is known", null=True),
                       "system": _kind("boolean", "holds the running OS"),
                       "numa_node": _kind("integer", "NUMA node of that function; null without one", null=True,
                                          minimum=-1),
                       "switch": _bdf("switch upstream port above that function; null when none", null=True),
                       "size_bytes": _kind("integer", "size; null when unreadable", null=True, minimum=0),
                       "unknown": _kind("string", "why no PCI function is known (only then)"),
                       "controller": _kind("string", "NVMe over fabrics: the controller"),
                       "transport": _kind("string", "NVMe over fabrics: tcp, rdma ...", null=True),
                       "address": _kind("string", "NVMe over fabrics: the controller's address", null=True),
                       "nic": _kind("string", "NVMe over fabrics: the interface the address names (host_iface)",
                                    null=True),
                   }, optional=("unknown", "controller", "transport", "address", "nic"))),
    "matrix": _map("Link class between every pair of GPU<index>, NVMe names and NIC names (X on the diagonal).",
                   _map("The classes of one device to every other.", _MATRIX_CLASS)),
    "groups": _list("Affinity groups (docs/architecture.md#affinity-groups).", _object("An affinity group.", {
        "id": _kind("integer", "1, 2 ... in the order of their first GPU", minimum=1),
        "gpus": _list("GPU indices", {"type": "integer", "minimum": 0}),
        "nvme": _list("data drives", _NAME),
        "nics": _list("the NICs of best class to its GPUs (unless SYS)", _NAME),
        "numa_node": {"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "integer"}}],
                      "description": "the GPUs' NUMA node; a list when they are on several"},
        "link": {"anyOf": [_CLASS, {"type": "null"}], "description": "worst GPU-drive class; null without drives"},
    })),
    "bridges": _list("Bridges above GPUs, data drives (every path) and NICs, with their ACS state.", _object("A bridge.", {
        "bdf": _bdf("PCI address"),
        "port_type": {"enum": sorted(set(PORT_NAMES.values())) + ["unknown"], "description": "PCIe port type"},
        "acs_offset": _kind("integer", "config-space offset of the ACS capability; null without one", null=True),
        "acs_cap": _kind("integer", "ACS capability register; null without ACS", null=True),
        "acs_ctrl": _kind("integer", "ACS control register; null without ACS", null=True),
        "acs_unknown": _kind("string", "why the ACS state could not be read (naming the file); null when read", null=True),
    })),
    "numa_nodes": _list("NUMA node numbers seen on PCI devices (-1 where the firmware gives none).",
                        {"type": "integer", "minimum": -1}),
    "p2pdma": _object("What the kernel's P2PDMA will decide for each provider/client pair (hw/p2pdma.py).", {
        "cpu_allows": _kind("boolean", "an AMD Zen CPU: any pair may go through the host bridge; null when unread",
                            null=True),
        "whitelist": _kind("string", "the kernel whose host-bridge whitelist is used"),
        "providers": _list("GPUs and functions publishing p2pmem", _bdf("PCI address")),
        "pairs": _list("One per provider and client (data drive controller or NIC).", _object("A pair.", {
            "provider": _bdf("the function whose memory is the target"),
            "client": _bdf("the function that moves the data"),
            "map": {"enum": ["bus_address", "host_bridge", "refused", "unknown"],
                    "description": "the kernel's PCI_P2PDMA_MAP_* (unknown: a fact it needs is unread)"},
            "distance": _kind("integer", "the kernel's hop count", minimum=0),
            "common": _bdf("the common upstream bridge; null when none", null=True),
            "acs_redirect": _list("functions with an ACS redirect bit between them, in the kernel's order "
                                  "(its pci=disable_acs_redir= list)", _bdf("PCI address")),
            "reason": _kind("string", "why, in words"),
        })),
    }),
    "pcie_links": _list("The link of every GPU, NVMe controller, RDMA NIC, data disk's PCI function and bridge port on"
                        " their paths to the root port, sorted by bdf.", _object("One end of a PCIe link.", {
                            "bdf": _bdf("PCI address"),
                            "kind": {"enum": ["gpu", "nvme", "nic", "disk", "bridge"]},
                            "port": {"enum": ["endpoint"] + sorted(set(PORT_NAMES.values()) - {"endpoint"}) + ["unknown"],
                                     "description": "PCIe port type (endpoint for a device)"},
                            "current_speed_gts": _kind("number", "GT/s; null when unreadable", null=True),
                            "max_speed_gts": _kind("number", "GT/s; null when unreadable", null=True),
                            "current_width": _kind("integer", "lanes; null when unreadable", null=True, minimum=1),
                            "max_width": _kind("integer", "lanes; null when unreadable", null=True, minimum=1),
                            "expected_speed_gts": _kind("number", "the best both ends support; null when unknown",
                                                        null=True),
                            "expected_width": _kind("integer", "the best both ends support; null when unknown",
                                                    null=True, minimum=1),
                            "degraded": _kind("boolean", "below the expected; null when a value is unknown", null=True),
                            "upstream": _bdf("the port above in the tree; null below a root bus", null=True),
                            "partner": _bdf("the other end of the link; null when it is on no path", null=True),
                            "problem": _kind("string", "the files that could not be read; null when none", null=True),
                        })),
    "index_source": {"enum": ["nvml", "pci"], "description": "where the GPU indices come from"},
    "nvlink": {"anyOf": [_map("NVLinks of GPU<i> to GPU<j> from NVML (nvidia-smi topo -m's NV#).",
                              _map("links to each peer", {"type": "integer", "minimum": 1})),
                         {"type": "null"}],
               "description": "null when NVML was not used: unknown"},
}, optional=("nvlink",))  # reports written before it have none

_DRIVER = _object("The NVIDIA kernel driver.", {
    "loaded": _kind("boolean", "the nvidia module is loaded"),
    "version": _kind("string", "driver version; null when unknown", null=True),
    "open": _kind("boolean", "the open kernel module; null when unknown", null=True),
    "banner": _kind("string", "first line of /proc/driver/nvidia/version; null without it", null=True),
    "registry_dwords": _kind("string", "RegistryDwords as the driver runs with them; null without", null=True),
    "registry": _map("RegistryDwords as {name: value}", {"type": "string"}),
})

PLATFORM = _object("The platform of the node (module gds_platform).", {
    "kernel": _object("The running kernel.", {
        "release": _kind("string", "release (6.8.0-60-generic); null when unknown", null=True),
        "release_source": {"enum": ["osrelease", "cmdline", "uname", None], "description": "where it was read"},
        "version": _list("numeric version; null when the release starts with none", {"type": "integer", "minimum": 0},
                         null=True),
    }),
    "arch": _kind("string", "machine architecture (x86_64, aarch64); null when unknown", null=True),
    "cpu": _object("The CPU (first processor of /proc/cpuinfo).", {
        "vendor": _kind("string", "vendor; null when unknown", null=True),
        "family": _kind("integer", "x86 cpu family number; null elsewhere or when unknown", null=True),
        "model": _kind("string", "model name; null when unknown", null=True),
        "arch": _kind("string", "architecture implied by cpuinfo; null when unknown", null=True),
        "grace": _kind("boolean", "NVIDIA Grace"),
    }),
    "cmdline": _object("The kernel command line.", {
        "text": _kind("string", "as text"),
        "args": _list("as arguments", _NAME),
    }),
    "iommu": _object("The IOMMU as it runs.", {
        "mode": {"enum": ["off", "pt", "on"], "description": "running mode"},
        "requested": {"enum": ["off", "pt", "on", None], "description": "what the command line asks for; null: the"
                      " kernel's default"},
        "units": _list("/sys/class/iommu units", _NAME),
        "groups": _kind("integer", "IOMMU groups", minimum=0),
        "group_types": _map("groups per default domain type", {"type": "integer", "minimum": 0}),
        "cmdline": _map("the IOMMU parameters of the command line (true: a bare flag)", {"type": ["string", "boolean"]}),
    }),
    "nvidia_driver": _DRIVER,
    "gpus": _list("GPUs from NVML; empty when NVML was not used.", _object("A GPU as NVML reports it.", {
        "index": _kind("integer", "NVML index", minimum=0),
        "bdf": _bdf("PCI address; null when NVML's bus id is none", null=True),
        "name": _kind("string", "product name"),
        "uuid": _kind("string", "GPU UUID"),
        "memory_total_bytes": _kind("integer", "memory", minimum=0),
        "bar1_total_bytes": _kind("integer", "BAR1 size; null when NVML does not say", null=True, minimum=0),
        "driver_version": _kind("string", "driver version", null=True),
        "cuda_driver_version": _kind("string", "CUDA driver API version; null when NVML does not say", null=True),
        "nvlinks": _map("NVLinks to each other GPU by its PCI address (nvidia-smi topo -m's NV#)",
                        {"type": "integer", "minimum": 1}),
        "open_kernel_module": _kind("boolean", "the open kernel module; null when unknown", null=True),
    })),
    "nvml": _object("Whether NVML was used.", {
        "used": _kind("boolean", "NVML answered"),
        "reason": _kind("string", "why not; null when used", null=True),
    }),
    "nvidia_fs": _object("nvidia-fs.", {
        "loaded": _kind("boolean", "loaded"),
        "version": _kind("string", "version; null when unknown", null=True),
        "proc_version": _kind("boolean", "/proc/driver/nvidia-fs/version exists"),
        "rw_stats_enabled": _kind("boolean", "IO statistics on; null when unknown", null=True),
        "stats": _object("The header of /proc/driver/nvidia-fs/stats; null without it.", {
            "gds_version": _kind("string", "GDS version", null=True),
            "driver_version": _kind("string", "nvidia-fs version", null=True),
            "io_stats": _kind("boolean", "IO statistics enabled", null=True),
            "peer_io_stats": _kind("boolean", "peer IO statistics enabled", null=True),
            "reads": _kind("integer", "reads; null when the statistics are off", null=True, minimum=0),
            "writes": _kind("integer", "writes; null when the statistics are off", null=True, minimum=0),
        }, null=True),
    }),
    "modules": _object("Kernel modules.", {
        "loaded": _map("loaded, per module of interest", {"type": "boolean"}),
        "shipped": _map("shipped with the running kernel; null without modules.dep", {"type": "boolean"}, null=True),
        "peermem": {"enum": ["nvidia_peermem", "nv_peer_mem", None], "description": "the peer-memory module to use"},
    }),
    "nvme_multipath": _kind("string", "nvme_core's multipath parameter (Y or N); null when not loaded", null=True),
    "p2pdma": _object("P2PDMA prerequisites and the verdict.", {
        "kernel": _kind("boolean", "kernel 6.2 or later"),
        "pgmap_ops": _kind("boolean", "p2pdma_pgmap_ops in kallsyms; null when unreadable", null=True),
        "config": _kind("boolean", "CONFIG_PCI_P2PDMA of the running kernel (/boot/config-<release>, /proc/config.gz); "
                        "null when unreadable", null=True),
        "built_in": _kind("boolean", "the running kernel has P2PDMA: config, else pgmap_ops; null when neither is read",
                          null=True),
        "kernel_supported": _kind("boolean", "the kernel supports it (version or backport) and is not built without it"),
        "open_driver": _kind("boolean", "the open NVIDIA module; null when unknown", null=True),
        "supported": _kind("boolean", "P2PDMA can be used"),
    }),
    "acs_cmdline": _object("The ACS kernel parameters the running kernel understands.", {
        "config_acs": _kind("boolean", "pci=config_acs"),
        "device_lists": _kind("boolean", "lists of several devices are parsed (false on 6.11 to 6.13)"),
        "disable_acs_redir": _kind("boolean", "pci=disable_acs_redir"),
    }),
    "udev": _object("The udev database entries of the data block devices.", {
        "path": _kind("string", "/run/udev below the root"),
        "readable": _kind("boolean", "its data directory is readable"),
        "devices": _list("one entry per data block device", _object("A block device.", {
            "name": _kind("string", "block device"),
            "dev": _kind("string", "major:minor; null when unknown", null=True, pattern="^[0-9]+:[0-9]+$"),
            "present": _kind("boolean", "its udev entry exists"),
            "path": _kind("string", "its udev entry; null when dev is unknown", null=True),
        })),
        "missing": _list("devices without an entry", _NAME),
    }),
    "md_arrays": _list("md arrays from /proc/mdstat.", _object("An md array.", {
        "name": _kind("string", "md1"),
        "level": _kind("string", "raid0 ...; null for an inactive array", null=True),
        "state": _kind("string", "active, inactive ..."),
        "members": _list("member disks (whole disks)", _NAME),
    })),
    "vfio_devices": _list("PCI addresses bound to vfio-pci.", _bdf("PCI address")),
    "lockdown": {"enum": ["none", "integrity", "confidentiality", None], "description": "kernel lockdown; null without"
                 " the lockdown LSM"},
    "packages": _map("Installed packages of interest with versions; null without dpkg.",
                     {"type": ["string", "null"]}, null=True),
    "dgx_release": _map("/etc/dgx-release; null on a node that is not DGX OS.", {"type": "string"}, null=True),
})

FACTS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_ID,
    "title": "gds-commission facts",
    "description": "ansible_facts of the gds.commission modules gds_topology and gds_platform.",
    "type": "object",
    "properties": {"gds_topology": TOPOLOGY, "gds_platform": PLATFORM,
                   "gds_check_mode": {"type": "boolean", "description": (
                       "Whether the task that read the platform ran in check mode, as Ansible told the "
                       "module: every tuning step changes the node only when this is false.")}},
    "additionalProperties": True,
}


_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "a whole number",
          "number": "a number", "boolean": "true or false", "null": "null"}
_TYPES = {"object": (dict,), "array": (list,), "string": (str,), "integer": (int,), "number": (int, float),
          "boolean": (bool,), "null": (type(None),)}


def _is(value, kind):
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, _TYPES[kind])


def fact_error(value, schema, where, keys=None):
    """Where ``value`` (facts as a module received them) is not of ``schema``'s shape: the first
    place, named (``topology.nics[2].name is 5, expected a string``), or None. Types, enums and
    minimums of the keys present (``keys``: only these top-level ones); a key that is absent is
    the reader's matter, and the text of a name (a BDF's pattern) discovery's own promise, which
    tests/unit/test_facts_schema.py holds it to. Modules call it where facts enter, so a hand-made or stale fact
    is refused with its key, never read half-way."""
    kinds = schema.get("type")
    if "anyOf" in schema:
        errors = [fact_error(value, member, where) for member in schema["anyOf"]]
        return None if None in errors else errors[0]
    if kinds is not None and not any(_is(value, k) for k in (kinds if isinstance(kinds, list) else [kinds])):
        return "%s is %s, expected %s" % (where, _shown(value), " or ".join(
            _WORDS[k] for k in (kinds if isinstance(kinds, list) else [kinds])))
    if "enum" in schema and value not in schema["enum"]:
        return "%s is %s, expected one of %s" % (where, _shown(value), ", ".join(str(v) for v in schema["enum"]))
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        return "%s is %s, expected at least %s" % (where, value, schema["minimum"])
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for key, item in value.items():
            if keys is not None and key not in keys:
                continue
            sub = properties.get(key, schema.get("additionalProperties"))
            error = fact_error(item, sub, "%s.%s" % (where, key)) if isinstance(sub, dict) else None
            if error:
                return error
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            error = fact_error(item, schema["items"], "%s[%d]" % (where, index))
            if error:
                return error
    return None


def _shown(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def schema_json():
    """The schema as JSON text."""
    return json.dumps(FACTS_SCHEMA, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    import sys
    sys.stdout.write(schema_json())
