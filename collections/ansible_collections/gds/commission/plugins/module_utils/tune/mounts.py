# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Network file system mounts for GDS: what each one is, which NIC it leaves through, and the
checks.

The mount table comes from hw/procfs (mountinfo, its super options carry an NFS mount's
``proto``, ``rsize``, ``addr``...). The server address is routed as the kernel would: ``ip -j
route get`` on a live node (it knows policy routing and gives the source address), else the
longest-prefix match in /proc/net/route or /proc/net/ipv6_route (the main table). A node's own
address (``local ... dev lo``) counts as the interface that holds it; a link-local IPv6 server
leaves through the interface its zone names (``fe80::1%ib8``, or the kernel's ifindex
``fe80::1%3``), never through whichever interface lists fe80::/64 first. The egress
netdev is then matched against the netdevs of the RDMA devices in the gds_topology facts; a
bond or VLAN is followed down through its sysfs ``lower_*`` links. The pairing with GPUs comes
from the topology's link matrix.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import struct

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import UnreadableFile, read_file
from ansible_collections.gds.commission.plugins.module_utils.core.spec import RoleSpec, Var, on_node
from ansible_collections.gds.commission.plugins.module_utils.core.variables import errors, given_int, is_list, path_error
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import lower_netdevs, netdev_by_ifindex, paired_nics
from ansible_collections.gds.commission.plugins.module_utils.hw.facts_schema import TOPOLOGY, fact_error
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import LINK_CLASSES, class_rank
from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import ProcfsError, read_mounts
from ansible_collections.gds.commission.plugins.module_utils.tune.raid import SYSTEM_DIRS, system_dir

# fstype -> the cufile.json ``fs`` section that configures it
NETFS_TYPES = {"nfs": "nfs", "nfs4": "nfs", "lustre": "lustre", "beegfs": "beegfs",
               "gpfs": "gpfs", "wekafs": "weka"}
# the verdicts an option such as gds_netfs_tcp_verdict may name
OPTION_VERDICTS = ("PASS", "WARN", "FAIL")
# Lustre LNet network types that run over RDMA (o2iblnd, kfilnd); tcp is socklnd.
_LNET_RDMA = ("o2ib", "kfi", "gni")
# The guide's naming: /mnt/nfs/<client interface>/data/<server interface number>
GUIDE_NAME = re.compile(r"^/mnt/nfs/([^/]+)/data/([^/]+)$")
_RTF_UP, _RTF_REJECT = 0x0001, 0x0200
# Options nfs_show_mount_options (fs/nfs/super.c) prints with %u, and their largest values
_UNSIGNED_MAX = {"rsize": 0xFFFFFFFF, "wsize": 0xFFFFFFFF, "port": 0xFFFF,
                 "nconnect": 0xFFFFFFFF, "max_connect": 0xFFFFFFFF}
_DECIMAL = re.compile(r"^[0-9]+$")
# RPC netids (net/sunrpc): the same transport over IPv4 and IPv6 (rdma6 is RDMA)
_NETID = re.compile(r"^(tcp|udp|rdma)6?$")
_IFNAME = re.compile(r"^[^/:\s]+$")


class NetfsError(Exception):
    """Unreadable or malformed input; the message names the file, option or value at fault."""


# --------------------------------------------------------------------------------------------
# Mount options and sources
# --------------------------------------------------------------------------------------------
def _options(mount):
    """{name: value or True} from the per-mount and the file system's own options; an option
    the kernel prints without a value (``hard``, ``noac``) is True."""
    out = {}
    for word in list(mount.get("options") or []) + list(mount.get("super_options") or []):
        if not word:
            continue
        name, sep, value = word.partition("=")
        out[name] = value if sep else True
    return out


def _text(opts, name, errors):
    """The value of option ``name``, None when absent. nfs_show_mount_options (fs/nfs/super.c)
    prints these as name=value: one without a value is an error of the mount."""
    value = opts.get(name)
    if value is True or value == "":
        errors.append("%s has no value" % (name if value is True else name + "="))
        return None
    return value


def _unsigned(opts, name, errors):
    """Option ``name`` as the kernel's unsigned decimal (``%u``), None when absent; no value, a
    sign, or a number out of range is an error of the mount naming the option and value."""
    value = _text(opts, name, errors)
    if value is None:
        return None
    top = _UNSIGNED_MAX[name]
    if not _DECIMAL.match(value) or int(value) > top:
        errors.append("%s=%s is not a whole number from 0 to %d" % (name, value, top))
        return None
    return int(value)


def _transport(proto, errors):
    """An NFS ``proto`` (an RPC netid: tcp, udp, rdma; tcp6, udp6, rdma6 over IPv6) -> the
    transport; any other value is an error of the mount (None: not judged as TCP)."""
    if proto is None:
        return None
    match = _NETID.match(proto.lower())
    if match is None:
        errors.append("proto=%s is not an RPC netid (tcp, udp, rdma, tcp6, udp6, rdma6)" % proto)
        return None
    return match.group(1)


def parse_address(text):
    """(address, zone) of an IP address as a mount shows it (``10.0.0.5``, ``[fd00::5]``,
    ``fe80::1%ib8``, ``fe80::1%3``); zone None when there is none. None for a host name,
    nothing, or anything that is not a string."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    address, sep, zone = text.partition("%")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return None
    if sep and ip.version == 4:
        return None  # only IPv6 has zones (RFC 4007)
    return str(ip), zone if sep else None


def _address(text):
    """``text`` as an IP address string (zone left out), or None when it is not an address."""
    parsed = parse_address(text)
    return parsed[0] if parsed else None


def valid_ifname(name):
    """An interface name as the kernel's dev_valid_name (net/core/dev.c) allows it: 1 to 15
    bytes, not ``.`` or ``..``, no ``/``, ``:`` or white space."""
    return (isinstance(name, str) and name not in (".", "..") and _IFNAME.match(name) is not None
            and len(name.encode("utf-8", "surrogateescape")) <= 15)


def _first_nid(nids):
    """(host, LNet network type) of the first NID of a Lustre source: ``addr@o2ib1``, an IPv6 NID
    in brackets ``[fd00::1]@o2ib``, or one without brackets (``fd00::1@o2ib``). A server's NIDs
    are separated by ``,``, failover servers by ``:``."""
    if nids.startswith("["):
        host, sep, rest = nids[1:].partition("]")
        if not sep:
            return None, None
        rest = rest[1:] if rest.startswith("@") else ""
    else:
        host, dummy, rest = nids.split(",")[0].partition("@")
        if ":" in host and parse_address(host) is None:
            host, rest = host.split(":")[0], ""  # the first of failover servers without @lnet
    lnet = re.match(r"(\w*?)\d*(?:$|[^\w])", rest)  # o2ib1 -> o2ib, tcp0 -> tcp
    return host or None, (lnet.group(1) or None) if lnet else None


def split_source(fstype, source, options):
    """(server, export, transport hint) of a network mount's source.

    NFS ``host:/export`` (``[v6]:/export``, ``[fe80::1%ib8]:/export``); Lustre
    ``nid[,nid][:nid...]:/fsname`` whose NIDs are ``address@lnet`` (``[v6]@lnet``); WekaFS
    ``backend[,backend]/fs``; GPFS and BeeGFS name no server in their source (GPFS its device,
    BeeGFS ``beegfs_nodev``)."""
    if fstype in ("nfs", "nfs4"):
        if source.startswith("["):
            host, dummy, export = source[1:].partition("]:")
        else:
            host, dummy, export = source.partition(":")
        return host or None, export or None, None
    if fstype == "lustre":
        nids, dummy, fsname = source.rpartition(":/")
        host, kind = _first_nid(nids) if nids else (None, None)
        transport = None
        if kind:
            transport = "rdma" if kind in _LNET_RDMA else kind
        return host, fsname or None, transport
    if fstype == "wekafs":
        host, sep, fs = source.partition("/")
        host = host.split(",")[0]
        net = options.get("net")
        transport = "udp" if net == "udp" else None
        return (host or None, fs or None, transport) if sep else (None, source, transport)
    return None, source, None


# --------------------------------------------------------------------------------------------
# Routes
# --------------------------------------------------------------------------------------------
def _read(path):
    try:
        return read_file(path)
    except UnreadableFile as exc:
        raise NetfsError(str(exc))


def parse_route(text, path="/proc/net/route"):
    """/proc/net/route -> [{dev, network, gateway, metric, flags}] (IPv4 main table).

    Addresses are the kernel's ``%08X`` of a network-order word, i.e. native byte order."""
    routes = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if number == 1 and fields and fields[0] == "Iface":
            continue
        if not fields:
            continue
        try:
            dest, gateway, flags, metric, mask = (int(fields[1], 16), int(fields[2], 16),
                                                  int(fields[3], 16), int(fields[6]),
                                                  int(fields[7], 16))
        except (IndexError, ValueError):
            raise NetfsError("%s line %d: not a route line: %r" % (path, number, line))
        addr = socket.inet_ntoa(struct.pack("=I", dest))
        netmask = socket.inet_ntoa(struct.pack("=I", mask))
        try:
            network = ipaddress.ip_network("%s/%s" % (addr, netmask), strict=False)
        except ValueError:
            raise NetfsError("%s line %d: bad mask %s" % (path, number, fields[7]))
        routes.append({"dev": fields[0], "network": network, "metric": metric, "flags": flags,
                       "gateway": socket.inet_ntoa(struct.pack("=I", gateway)) if gateway else None})
    return routes


def parse_ipv6_route(text, path="/proc/net/ipv6_route"):
    """/proc/net/ipv6_route -> the same records: dest, prefix length, source, source prefix
    length, next hop, metric, refcnt, use, flags (all hex), device."""
    routes = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            dest = ipaddress.IPv6Address(bytes.fromhex(fields[0]))
            plen = int(fields[1], 16)
            hop = ipaddress.IPv6Address(bytes.fromhex(fields[4]))
            metric, flags, dev = int(fields[5], 16), int(fields[8], 16), fields[9]
            network = ipaddress.ip_network("%s/%d" % (dest, plen), strict=False)
        except (IndexError, ValueError):
            raise NetfsError("%s line %d: not a route line: %r" % (path, number, line))
        routes.append({"dev": dev, "network": network, "metric": metric, "flags": flags,
                       "gateway": str(hop) if int(hop) else None})
    return routes


def best_route(routes, address):
    """The route the kernel's main table takes to ``address``: longest prefix, then lowest
    metric; down, reject and loopback routes are not egress routes."""
    ip = ipaddress.ip_address(address)
    best = None
    for route in routes:
        if not route["flags"] & _RTF_UP or route["flags"] & _RTF_REJECT or route["dev"] == "lo":
            continue
        if route["network"].version != ip.version or ip not in route["network"]:
            continue
        key = (-route["network"].prefixlen, route["metric"])
        if best is None or key < best[0]:
            best = (key, route)
    return best[1] if best else None


class Router(object):
    """Egress netdev and source address towards a server address.

    ``run_ip`` (``[args] -> (rc, stdout, stderr)``) runs ``ip`` on a live node; without it, or
    when it fails, the procfs route tables decide."""

    def __init__(self, procfs_root, run_ip=None):
        self.procfs_root = procfs_root
        self.run_ip = run_ip
        self._tables = {}

    def _table(self, version):
        if version not in self._tables:
            name = "route" if version == 4 else "ipv6_route"
            path = os.path.join(self.procfs_root, "net", name)
            if not os.path.exists(path):
                self._tables[version] = (path, None)
            else:
                parse = parse_route if version == 4 else parse_ipv6_route
                self._tables[version] = (path, parse(_read(path), path))
        return self._tables[version]

    def _owner(self, address):
        """The interface that holds ``address`` (``ip -j addr show to ADDR/len``), else None."""
        ip = ipaddress.ip_address(address)
        rc, out, _err = self.run_ip(["-j", "addr", "show", "to", "%s/%d" % (ip, ip.max_prefixlen)])
        if rc != 0:
            return None
        try:
            links = json.loads(out) or []
        except (ValueError, TypeError):
            return None
        for link in links if isinstance(links, list) else []:
            if not isinstance(link, dict) or not link.get("ifname") or link["ifname"] == "lo":
                continue
            for info in link.get("addr_info") or []:
                local = _address(info.get("local")) if isinstance(info, dict) else None
                if local is not None and ipaddress.ip_address(local) == ip:
                    return link["ifname"]
        return None

    def _get(self, args):
        """The first object of ``ip -j route get ...``, {} when ip fails or prints no object."""
        rc, out, _err = self.run_ip(["-j", "route", "get"] + args)
        if rc != 0:
            return {}
        try:
            entry = (json.loads(out) or [{}])[0]
        except (ValueError, IndexError, TypeError, KeyError):
            return {}
        if not isinstance(entry, dict):
            return {}
        return {k: v for k, v in entry.items() if isinstance(v, str) and v}

    def route(self, address, dev=None):
        """{dev, source, gateway, via} or {dev: None, reason}.

        ``dev``: the interface a link-local address's zone names; the kernel sends there
        whatever the tables say about fe80::/64 (every interface has that route)."""
        if dev is not None:
            source = self._get([address, "oif", dev]).get("prefsrc") if self.run_ip else None
            return {"dev": dev, "source": source, "gateway": None, "via": "zone %%%s" % dev}
        if self.run_ip is not None:
            entry = self._get([address])
            if entry.get("dev") and (entry.get("type") == "local" or entry["dev"] == "lo"):
                # the node's own address (a loopback mount): the kernel routes it through
                # lo, but the mount's interface is the one that owns the address
                owner = self._owner(address)
                if owner:
                    return {"dev": owner, "source": entry.get("prefsrc") or address, "gateway": None,
                            "via": "ip addr show (local address)"}
            if entry.get("dev"):
                return {"dev": entry["dev"], "source": entry.get("prefsrc"),
                        "gateway": entry.get("gateway"), "via": "ip route get"}
        version = ipaddress.ip_address(address).version
        path, routes = self._table(version)
        if routes is None:
            return {"dev": None, "reason": "%s is missing" % path}
        route = best_route(routes, address)
        if route is None:
            return {"dev": None, "reason": "no route to %s in %s" % (address, path)}
        return {"dev": route["dev"], "source": None, "gateway": route["gateway"], "via": path}


# --------------------------------------------------------------------------------------------
# From a netdev to the RDMA device and the GPUs
# --------------------------------------------------------------------------------------------
def netdev_map(topology):
    """{netdev: RDMA device name} from the topology's NICs (netdev, netdevs, ports' netdevs)."""
    out = {}
    for nic in topology.get("nics") or []:
        names = [nic.get("netdev")] + list(nic.get("netdevs") or [])
        names += [p.get("netdev") for p in nic.get("ports") or [] if isinstance(p, dict)]
        for name in names:
            if name:
                out.setdefault(name, nic["name"])
    return out


def nic_class(topology, gpu, nics):
    """The best link class from GPU ``gpu`` to any of ``nics`` (the matrix), or None."""
    row = (topology.get("matrix") or {}).get("GPU%d" % gpu) or {}
    classes = [row[n] for n in nics if row.get(n)]
    return min(classes, key=class_rank) if classes else None


def paired_gpus(topology, nics):
    """GPUs paired with one of ``nics`` (hw/affinity.paired_nics, the one rule: never SYS)."""
    return [gpu for gpu, names in paired_nics(topology).items() if set(names) & set(nics)]


# --------------------------------------------------------------------------------------------
# The audit
# --------------------------------------------------------------------------------------------
def _shown(value):
    """A value for an error message, short."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _require(ok, where, wanted, value):
    if not ok:
        raise NetfsError("%s must be %s, got %s" % (where, wanted, _shown(value)))


def validate_topology(topology):
    """The parts of the gds_topology facts used here (nics, gpus, matrix) have the facts' shape
    (hw/facts_schema, the one schema); else NetfsError naming the key (``topology.nics[2].name``)
    and the value."""
    _require(isinstance(topology, dict), "topology", "the gds_topology facts (a dict)", topology)
    problem = fact_error(topology, TOPOLOGY, "topology", keys=("nics", "gpus", "matrix"))
    if problem:
        raise NetfsError(problem)
    for kind, key in (("gpus", "index"), ("nics", "name")):  # what names each entry here
        for i, entry in enumerate(topology.get(kind) or []):
            _require(key in entry, "topology.%s[%d].%s" % (kind, i, key), "given", None)
    return topology


def validate_interface_addresses(addresses):
    """``interface_addresses`` is {netdev: [address]} (one address may be a plain string, an
    address may carry its prefix length, ``10.0.0.5/24``): {netdev: [address]}, else NetfsError
    naming the entry."""
    if addresses is None:
        return {}
    _require(isinstance(addresses, dict), "interface_addresses",
             "a dict {netdev: [IP address]}", addresses)
    out = {}
    for dev, values in addresses.items():
        if not valid_ifname(dev):
            raise NetfsError("interface_addresses: key %s is not an interface name" % _shown(dev))
        values = [values] if isinstance(values, str) else [] if values is None else values
        _require(isinstance(values, list), "interface_addresses[%s]" % dev,
                 "a list of IP addresses", values)
        out[dev] = []
        for value in values:
            try:
                address = str(ipaddress.ip_interface(value).ip) if isinstance(value, str) else None
            except ValueError:
                address = _address(value)  # fe80::5%ib0: the zone is this interface
            if address is None:
                raise NetfsError("interface_addresses[%s]: %s is not an IP address"
                                 % (dev, _shown(value)))
            out[dev].append(address)
    return out


def validate_gpu_map(gpu_map, topology):
    """``gpu_map`` is {mount point: [GPU index]}: raise NetfsError naming the bad entry."""
    if gpu_map is None:
        return {}
    if not isinstance(gpu_map, dict):
        raise NetfsError("gpu_map must be a dict {mount point: [GPU index]}, got %r" % (gpu_map,))
    known = {g["index"] for g in topology.get("gpus") or []}
    out = {}
    for mount, gpus in gpu_map.items():
        if not isinstance(mount, str) or not mount.startswith("/"):
            raise NetfsError("gpu_map: key %r is not an absolute mount point" % (mount,))
        if not isinstance(gpus, list):
            raise NetfsError("gpu_map[%s] must be a list of GPU indices, got %r" % (mount, gpus))
        for gpu in gpus:
            if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0 or (known and gpu not in known):
                raise NetfsError("gpu_map[%s]: %r is not a GPU index of this node (%s)" % (
                    mount, gpu, ", ".join(str(g) for g in sorted(known)) or "no GPUs"))
        key = mount.rstrip("/") or "/"
        if key in out:
            raise NetfsError("gpu_map: keys %s and %s name the same mount point" % (
                next(k for k in gpu_map if k != mount and (k.rstrip("/") or "/") == key), mount))
        out[key] = gpus
    return out


# What the gds_netfs role writes into fstab, whose fields white space separates: mount options, a
# server (an address or a host name), an export path; a client interface is a path component too.
MOUNT_OPTIONS = re.compile(r"^[A-Za-z0-9_=,.:/-]+$")
_SERVER = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*|[0-9A-Fa-f:]+)$")
_EXPORT = re.compile(r"^/[A-Za-z0-9._/+@-]*$")
_PATH_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _mount_entry_ok(item):
    if not isinstance(item, dict):
        return False
    index, options = given_int(item.get("server_index")), item.get("options")
    return (valid_ifname(item.get("client_if")) and bool(_PATH_NAME.match(item["client_if"]))
            and isinstance(item.get("server"), str) and bool(_SERVER.match(item["server"]))
            and isinstance(item.get("export"), str) and bool(_EXPORT.match(item["export"]))
            and not re.search(r"(^|/)\.\.(/|$)", item["export"])
            and index is not None and index >= 0
            and (options is None or isinstance(options, str) and bool(MOUNT_OPTIONS.match(options))))


def validate_vars(values, host=None, hosts=()):
    """The gds_netfs role's variables (gds_netfs_*): [message naming the variable and the value]."""
    root, fstab = values.get("gds_netfs_mount_root", "/mnt/nfs"), values.get("gds_netfs_fstab", "/etc/fstab")
    options, mounts = values.get("gds_netfs_mount_options", ""), values.get("gds_netfs_mounts", [])
    size = given_int(values.get("gds_netfs_min_io_size", 1))
    out = errors(
        None if size is not None and size > 0 else "gds_netfs_min_io_size must be a positive number of bytes, got %s"
        % values.get("gds_netfs_min_io_size"),
        path_error("gds_netfs_mount_root", root, spaces=False), path_error("gds_netfs_fstab", fstab, spaces=False),
        "gds_netfs_mount_root must not be / or inside a system directory (%s), got %s" % (", ".join(SYSTEM_DIRS), root)
        if isinstance(root, str) and system_dir(root) else None,
        None if isinstance(options, str) and MOUNT_OPTIONS.match(options)
        else "gds_netfs_mount_options must be comma-separated mount options without spaces, got %s" % (options,))
    try:
        validate_gpu_map(values.get("gds_netfs_gpu_map", {}), {})
    except NetfsError as exc:
        out.append("gds_netfs_%s (a map of absolute mount points to lists of GPU indices, such as "
                   "{/mnt/nfs/ib0/data/0: [0, 1]})" % exc)
    if not is_list(mounts):
        return out + ["gds_netfs_mounts must be a YAML list of mounts, got %r" % (mounts,)]
    for index, item in enumerate(mounts):
        if not _mount_entry_ok(item):
            out.append("gds_netfs_mounts[%d] = %r: client_if must be a netdev name (at most 15 characters), server "
                       "an address or host name, export an absolute path without '..' or spaces, server_index a "
                       "whole number >= 0, options comma-separated without spaces" % (index, item))
    points = ["%s/%s" % (m.get("client_if"), m.get("server_index")) for m in mounts if isinstance(m, dict)]
    if len(points) != len(set(points)):
        out.append("gds_netfs_mounts names one mount point twice: %s" % points)
    return out


def _zone_netdev(sysfs_root, zone):
    """(netdev, problem) of an IPv6 zone: a number is an ifindex (the kernel prints a link-local
    NFS server as ``addr=fe80::1%3``), anything else the interface's name."""
    if _DECIMAL.match(zone):
        dev = netdev_by_ifindex(sysfs_root, int(zone))
        if dev is None:
            return None, "zone %%%s: no interface has ifindex %s in %s" % (
                zone, zone, os.path.join(sysfs_root, "class", "net"))
        return dev, None
    if not valid_ifname(zone):
        return None, "zone %%%s is not an interface name" % zone
    net = os.path.join(sysfs_root, "class", "net")
    if os.path.isdir(net) and not os.path.lexists(os.path.join(net, zone)):
        return None, "zone %%%s: no such interface in %s" % (zone, net)
    return zone, None


def _server(fstype, host, opts, errors, resolve):
    """(address, zone) of the server, None when unknown: NFS's ``addr=`` (what the kernel
    connected to), else the source's host, resolved only where ``resolve`` is given."""
    given = _text(opts, "addr", errors) if fstype in ("nfs", "nfs4") else None
    parsed = parse_address(given)
    if given is not None and parsed is None:
        errors.append("addr=%s is not an IP address" % given)
    from_host = parse_address(host)
    if parsed is None:
        parsed = from_host
    elif parsed[1] is None and from_host and from_host[0] == parsed[0]:
        parsed = from_host  # the zone the source names ([fe80::1%ib8]:/export)
    if parsed is None and host and resolve is not None:
        parsed = parse_address(resolve(host))
    return parsed


def describe(mount, topology, router, sysfs_root, interface_addresses=None, resolve=None):
    """The facts of one network mount (see the module's RETURN for the keys)."""
    fstype = mount["fstype"]
    opts = _options(mount)
    errors = []  # options the kernel would not print so: an ERROR of this mount
    host, export, transport = split_source(fstype, mount["source"], opts)
    if fstype in ("nfs", "nfs4"):
        transport = _transport(_text(opts, "proto", errors), errors)
    server = _server(fstype, host, opts, errors, resolve)
    vers, nfsvers = _text(opts, "vers", errors), _text(opts, "nfsvers", errors)
    vers = vers or nfsvers
    clientaddr = _text(opts, "clientaddr", errors)
    if vers is None and fstype == "nfs4":
        vers = "4"
    fact = {
        "mountpoint": mount["target"], "fstype": fstype, "fs": NETFS_TYPES[fstype],
        "source": mount["source"], "server": host, "server_address": server[0] if server else None,
        "export": export, "options": opts,
        "transport": transport, "rdma": transport == "rdma",
        "port": _unsigned(opts, "port", errors), "vers": vers,
        "rsize": _unsigned(opts, "rsize", errors), "wsize": _unsigned(opts, "wsize", errors),
        "nconnect": _unsigned(opts, "nconnect", errors),
        "max_connect": _unsigned(opts, "max_connect", errors),
        "netdev": None, "lower_netdevs": [], "nics": [], "nic": None, "client_address": None, "route": None,
        "gpus": [], "errors": errors,
    }
    if server is None:
        if fstype in ("gpfs", "beegfs"):
            reason = "%s names no server in its mount table entry" % fstype
        elif host:
            reason = "server %s is a host name that did not resolve" % host
        else:
            reason = "no server address in the source %r or its options" % mount["source"]
        fact["route"] = {"dev": None, "reason": reason}
        return fact
    address, zone = server
    zone_dev = None
    ip = ipaddress.ip_address(address)
    if ip.version == 6 and ip.is_link_local:
        # fe80::/64 is on every interface: only the zone says which one (RFC 4007)
        if zone is None:
            fact["route"] = {"dev": None, "reason": "%s is link-local and the mount names no "
                                                    "interface (%%zone)" % address}
            return fact
        zone_dev, problem = _zone_netdev(sysfs_root, zone)
        if problem:
            fact["route"] = {"dev": None, "reason": problem}
            return fact
        fact["server_address"] = "%s%%%s" % (address, zone_dev)
    route = router.route(address, zone_dev)
    fact["route"] = route
    dev = route.get("dev")
    if not dev:
        return fact
    fact["netdev"] = dev
    by_netdev = netdev_map(topology)
    nics = []
    lowers = lower_netdevs(sysfs_root, dev)
    fact["lower_netdevs"] = [d for d in lowers if d != dev]
    for lower in lowers:
        nic = by_netdev.get(lower)
        if nic and nic not in nics:
            nics.append(nic)
    fact["nics"] = nics
    fact["nic"] = nics[0] if nics else None
    fact["gpus"] = paired_gpus(topology, nics) if nics else []
    client = route.get("source") or _address(clientaddr)
    if not client:
        client = next((a for a in (interface_addresses or {}).get(dev) or []
                       if ipaddress.ip_address(a).version == ip.version), None)
    fact["client_address"] = client
    return fact


def audit(procfs_root, sysfs_root, topology, run_ip=None, resolve=None, interface_addresses=None):
    """Every network file system mount of the node, described."""
    validate_topology(topology)
    interface_addresses = validate_interface_addresses(interface_addresses)
    try:
        mounts = read_mounts(procfs_root)
    except ProcfsError as exc:
        raise NetfsError("mount table: %s" % exc)
    router = Router(procfs_root, run_ip)
    return [describe(m, topology, router, sysfs_root, interface_addresses, resolve)
            for m in mounts if m["fstype"] in NETFS_TYPES]


def _gpu_list(gpus):
    return ",".join("GPU%d" % g for g in gpus) or "none"


def mount_checks(mounts, topology, gpu_map=None, expect_rdma=False, tcp_verdict="WARN",
                 far_verdict="WARN", io_size_verdict="WARN", min_io_size=1048576,
                 near_classes=("PIX", "PXB")):
    """The ``netfs: `` checks of the mounts (SKIP when there is none)."""
    for name, value in (("tcp_verdict", tcp_verdict), ("far_verdict", far_verdict),
                        ("io_size_verdict", io_size_verdict)):
        if value not in OPTION_VERDICTS:
            raise NetfsError("%s must be one of %s, got %r" % (name, ", ".join(OPTION_VERDICTS), value))
    _require(isinstance(near_classes, (list, tuple)), "near_classes", "a list of link classes",
             near_classes)
    for cls in near_classes:
        if cls not in LINK_CLASSES:
            raise NetfsError("near_classes: %r is not one of %s" % (cls, ", ".join(LINK_CLASSES)))
    _require(isinstance(min_io_size, int) and not isinstance(min_io_size, bool) and min_io_size >= 0,
             "min_io_size", "a size in bytes (0 or more)", min_io_size)
    validate_topology(topology)
    gpu_map = validate_gpu_map(gpu_map, topology)
    mapped = _gpu_map_check(gpu_map, mounts)
    if not mounts:
        return [check("netfs: mounts", "SKIP", "network file system mounts", "none",
                      "no %s mount on this node" % "/".join(sorted(NETFS_TYPES)))] + mapped
    all_gpus = [g["index"] for g in topology.get("gpus") or []]
    out = [check("netfs: mounts", "PASS", "network file system mounts",
                 len(mounts), ", ".join("%s (%s)" % (m["mountpoint"], m["fstype"]) for m in mounts))]
    for m in mounts:
        mp = m["mountpoint"]
        errors = m.get("errors")
        if errors:
            out.append(check("netfs: %s mount options" % mp, "ERROR", "options as the kernel prints them",
                             "; ".join(map(str, errors)) if isinstance(errors, list) else "unreadable: %r" % (errors,),
                             "%s: the checks of what these options say cannot be trusted" % mp))
        if m.get("transport") is None:
            out.append(check("netfs: %s transport" % mp, "SKIP", "rdma" if expect_rdma else "any",
                             "unknown", "%s shows no transport in its mount options" % m["fstype"]))
        elif m["transport"] == "rdma":
            out.append(check("netfs: %s transport" % mp, "PASS", "rdma" if expect_rdma else "any",
                             "rdma", "port %s" % m["port"] if m.get("port") else None))
        else:
            out.append(check(
                "netfs: %s transport" % mp, tcp_verdict if expect_rdma else "PASS",
                "rdma" if expect_rdma else "any", m["transport"],
                "GDS reads this mount through the CPU: mount it with proto=rdma (NFS: port 20049)"
                if expect_rdma else "RDMA not expected by this profile"))
        if m["fstype"] in ("nfs", "nfs4"):
            sizes = {k: _io_size(m.get(k)) for k in ("rsize", "wsize")}
            small = [k for k in ("rsize", "wsize") if sizes[k] is not None and sizes[k] < min_io_size]
            unknown = [k for k in ("rsize", "wsize") if sizes[k] is None]
            # present but no number (no value, a sign, out of range): not "not mounted with it"
            options = m.get("options") if isinstance(m.get("options"), dict) else {}
            bad = [k for k in unknown if k in options or m.get(k) is not None]
            actual = "rsize=%s,wsize=%s" % (m.get("rsize"), m.get("wsize"))
            if bad:
                out.append(check("netfs: %s rsize/wsize" % mp, "ERROR", ">= %d" % min_io_size,
                                 "; ".join(e for e in errors if str(e).startswith(tuple(bad)))
                                 if isinstance(errors, list) else ", ".join(bad),
                                 "the kernel prints rsize and wsize as numbers"))
            elif unknown:
                out.append(check("netfs: %s rsize/wsize" % mp, "SKIP", ">= %d" % min_io_size,
                                 actual, "%s not in the mount options" % "/".join(unknown)))
            else:
                out.append(check("netfs: %s rsize/wsize" % mp, io_size_verdict if small else "PASS",
                                 ">= %d" % min_io_size, actual,
                                 "mount with rsize=%d,wsize=%d" % (min_io_size, min_io_size)
                                 if small else None))
        out += _affinity_checks(m, topology, gpu_map.get(mp, all_gpus), far_verdict, near_classes)
    return out + mapped


def _io_size(value):
    """rsize or wsize as parsed: a whole number >= 0, else None (unknown)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _gpu_map_check(gpu_map, mounts):
    """[WARN check] naming the gpu_map keys that match no network mount: a typo there would
    otherwise leave the mount judged for every GPU, silently."""
    points = {m["mountpoint"] for m in mounts}
    stray = [k for k in gpu_map if k not in points]
    if not stray:
        return []
    return [check("netfs: gpu_map", "WARN", "every key a network mount of this node",
                  ", ".join(stray), "gpu_map names %s, not a network mount here (mounts: %s)" % (
                      ", ".join(stray), ", ".join(sorted(points)) or "none"))]


def _affinity_checks(m, topology, readers, far_verdict, near_classes):
    mp = m["mountpoint"]
    name = "netfs: %s NIC affinity" % mp
    expected = "a NIC %s to its GPUs" % "/".join(near_classes)
    out = []
    named = GUIDE_NAME.match(mp)
    netdev = m.get("netdev") if isinstance(m.get("netdev"), str) else None
    nics = [n for n in m.get("nics") if isinstance(n, str)] if isinstance(m.get("nics"), list) else None
    # the netdev and RDMA devices the route leads to: what the pairing is judged from
    judged = {"netdev": m.get("netdev"), "RDMA devices": m.get("nics")}
    if named and netdev and named.group(1) not in lower_names(m):
        out.append(check("netfs: %s interface" % mp, "WARN", named.group(1), netdev,
                         "the mount point names %s but the route to %s leaves through %s"
                         % (named.group(1), m.get("server_address"), netdev)))
    if not netdev:
        reason = (m.get("route") or {}).get("reason") or "no route"
        return out + [check(name, "SKIP", expected, "unknown", "%s: %s" % (mp, reason))]
    if not nics:
        return out + [check(name, "SKIP", expected, netdev,
                            "%s leaves through %s, a netdev with %s" % (
                                mp, netdev, "no RDMA device: GDS cannot use it for RDMA" if nics == []
                                else "RDMA devices unknown (%r)" % (m.get("nics"),)))]
    if not readers:
        return out + [check(name, "SKIP", expected, m.get("nic"), "no GPU reads %s (gpu_map)" % mp)]
    classes = {g: nic_class(topology, g, nics) for g in readers}
    judged["link classes"] = [classes[g] for g in readers]
    near = [g for g in readers if classes[g] in near_classes]
    far = [g for g in readers if g not in near]
    nic = "%s (%s)" % ("+".join(nics), netdev)
    described = ", ".join("GPU%d %s" % (g, classes[g] or "unknown") for g in readers)
    if near:
        detail = "%s leaves through %s, paired with %s" % (mp, nic, _gpu_list(near))
        if far:
            detail += "; also read by far GPUs %s" % ", ".join(
                "GPU%d (%s)" % (g, classes[g] or "unknown") for g in far)
        return out + [check(name, "PASS", expected, described, detail, inputs=judged)]
    own = []
    for g in far:
        gpu = next((x for x in topology.get("gpus") or [] if x["index"] == g), {})
        if gpu.get("nics"):
            own.append("GPU%d: %s" % (g, gpu["nics"][0]))
    detail = "%s leaves through NIC %s, far from every GPU that reads it (%s)" % (
        mp, nic, _gpu_list(readers))
    if own:
        detail += "; their own NICs: %s" % ", ".join(own)
    return out + [check(name, far_verdict, expected, described, detail)]


def lower_names(m):
    return [m.get("netdev")] + list(m.get("lower_netdevs") or [])


# The role gds_netfs: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_netfs', 'gds_netfs_',
    short_description='Audit the network file system mounts GDS reads against the NICs of the GPUs',
    description=('Describes every nfs, nfs4, lustre, beegfs, gpfs and wekafs mount (module gds_netfs) with the NIC '
                 "it leaves through and that NIC's GPUs, and records the netfs checks in gds_netfs_checks; the "
                 'mounts are the host fact gds_netfs (ansible_facts).',
                 "With gds_netfs_manage_mounts, writes fstab entries for gds_netfs_mounts with the guide's naming "
                 '(/mnt/nfs/<client_if>/data/<server_index>); mounting them needs gds_netfs_allow_mount.',),
    variables=[
        Var('gds_netfs_procfs_root', 'path',
            'Where procfs is mounted on the node (mountinfo, net/route, net/ipv6_route).',
            on_node('/proc')),
        Var('gds_netfs_sysfs_root', 'path',
            'Where sysfs is mounted on the node (the lower_* links of bonds and VLANs).',
            on_node('/sys')),
        Var('gds_netfs_expect_rdma', 'bool',
            'The profile wants the network mounts over RDMA (NFS proto=rdma, Lustre o2ib).',
            False),
        Var('gds_netfs_tcp_verdict', 'str',
            'Verdict of a mount that is not RDMA where `gds_netfs_expect_rdma`.',
            'WARN',
            choices=('WARN', 'FAIL')),
        Var('gds_netfs_far_verdict', 'str',
            'Verdict of a mount whose NIC is far from every GPU that reads it.',
            'WARN',
            choices=('WARN', 'FAIL')),
        Var('gds_netfs_io_size_verdict', 'str',
            'Verdict of an NFS mount with rsize or wsize below `gds_netfs_min_io_size`.',
            'WARN',
            choices=('WARN', 'FAIL')),
        Var('gds_netfs_min_io_size', 'int',
            'Smallest rsize/wsize in bytes (the guide mounts with 1 MiB).',
            1048576),
        Var('gds_netfs_near_classes', 'list',
            'GPU-NIC link classes that count as paired.',
            ['PIX', 'PXB'],
            choices=('PIX', 'PXB', 'PHB', 'NODE', 'SYS'),
            elements='str'),
        Var('gds_netfs_gpu_map', 'dict',
            'Which GPUs read which mount (`{/mnt/nfs/ib0/data/0: [0, 1]}`); a mount not listed: every GPU.',
            {}),
        Var('gds_netfs_interface_addresses', 'dict',
            'Addresses per netdev (`{ib0: [192.168.0.20]}`) for the client address where the route gives none.',
            {}),
        Var('gds_netfs_manage_mounts', 'bool',
            'Manage fstab entries for `gds_netfs_mounts` (opt-in).',
            False),
        Var('gds_netfs_allow_mount', 'bool',
            'Also mount them now (and remount one whose entry changed); without it only fstab is written.',
            False),
        Var('gds_netfs_mounts', 'list',
            'Mounts to manage: `[{client_if: ib0, server: 192.168.0.10, export: /mnt/nfs_10/10, server_index: 0, '
            'options?, fstype?}]`.',
            [],
            elements='dict',
            options={'client_if': {'type': 'str',
                                   'required': True,
                                   'description': 'Client netdev the mount is named after.'},
                     'server': {'type': 'str', 'required': True, 'description': 'Server address or host name.'},
                     'export': {'type': 'str', 'required': True, 'description': 'Exported path on the server.'},
                     'server_index': {'type': 'int',
                                      'required': True,
                                      'description': 'Number of the server interface (the last path component).'},
                     'options': {'type': 'str',
                                 'description': 'Mount options of this entry (default gds_netfs_mount_options).'},
                     'fstype': {'type': 'str',
                                'choices': ['nfs', 'nfs4'],
                                'default': 'nfs',
                                'description': 'File system type.'}}),
        Var('gds_netfs_mount_root', 'path',
            "Mount points are `<root>/<client_if>/data/<server_index>`, the guide's naming.",
            '/mnt/nfs'),
        Var('gds_netfs_mount_options', 'str',
            "Mount options of a managed mount (an entry's own `options` win).",
            'vers=3,proto=rdma,port=20049,rsize=1048576,wsize=1048576,hard'),
        Var('gds_netfs_fstab', 'path',
            'The fstab the managed mounts go to; a simulated node has it below its gds_root.',
            on_node('/etc/fstab')),
        Var('gds_netfs_reuse', 'bool',
            'Keep the mounts and the audit an earlier play of the same run made (`gds_netfs_checks` is set) '
            'instead of doing them again; `playbooks/bench.yml` sets it (after `tune.yml` in `commission.yml`; run '
            'alone it audits).',
            False),
    ],
    entry_points={
        'verify': "main",
        'validate': "main",
        'steps': "main",
    },
)
