# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Linux kernel will decide for a peer-to-peer DMA between two PCI functions.

GDS's P2PDMA mode, and any O_DIRECT transfer into a device's p2pmem, go through the kernel's
``pci_p2pdma_map_type()`` (drivers/pci/p2pdma.c, ``calc_map_type_and_dist``). It decides once per
provider/client pair, from the PCI tree and the ACS Control registers, as follows:

- walk from the provider up its bridges; each function on the way (the common bridge included)
  with an ACS Control redirect bit (P2P Request Redirect, Completion Redirect or Egress Control)
  is listed; then from the client up to the common bridge, listed likewise;
- a common upstream bridge and nothing listed: ``bus_address`` (the switch routes the TLPs);
- otherwise the transfer must go through the host bridge, which is allowed on an AMD CPU of
  family 17h (Zen) or later, or when the host bridge's device (devfn 00.0 of its root bus) is on
  the kernel's whitelist (some entries only for two devices under the same host bridge);
- else ``refused``: the kernel logs "cannot be used for peer-to-peer DMA as the client and
  provider (...) do not share an upstream bridge or whitelisted host bridge" (and the ACS list as
  ``pci=disable_acs_redir=...``) and the I/O fails.

This module repeats that decision from the product's facts (the PciTree, /proc/cpuinfo, the
kernel release), so the report can say for every GPU/drive/NIC pair what the kernel will do, before
any transfer. The QEMU guest holds it against the kernel's answer for every pair
(tests/integration/test_guest_p2pdma.py, ``make vm-p2p``; docs/p2pdma.md).
"""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.hw.pci import bdf_key, controller_bdfs, is_root_bus

# ACS Control bits the kernel reads as a redirect (pci_bridge_has_acs_redir: RR | CR | EC).
ACS_RR = 0x0004
ACS_CR = 0x0008
ACS_EC = 0x0020
ACS_REDIRECT = ACS_RR | ACS_CR | ACS_EC

AMD_ZEN_FAMILY = 0x17   # cpu_supports_p2pdma(): any AMD CPU of family 17h or later

# pci_p2pdma_whitelist of Linux 7.3.4, read from the table in Debian's 7.3.4+deb13-amd64 kernel
# image (trixie-backports, the QEMU guest's kernel): (vendor, device or None for any device,
# only between two devices under the same host bridge). Entries are only ever added; the first
# nine are the original Intel list (Linux 4.20 to 5.x), the rest came later, so on an older
# kernel a match outside the first nine is unknown, not allowed.
WHITELIST_KERNEL = (7, 3, 4)
WHITELIST_SOURCE = "Linux 7.3.4 drivers/pci/p2pdma.c pci_p2pdma_whitelist (Debian 7.3.4+deb13-amd64)"
HOST_BRIDGE_WHITELIST = (
    (0x8086, 0x3c00, True), (0x8086, 0x3c01, True),    # Intel Xeon E5 / Core i7
    (0x8086, 0x2f00, True), (0x8086, 0x2f01, True),    # Intel Xeon E5 v3 / E7 v3
    (0x8086, 0x2030, False), (0x8086, 0x2031, False),  # Intel Skylake-E root ports
    (0x8086, 0x2032, False), (0x8086, 0x2033, False), (0x8086, 0x2020, False),
    (0x8086, 0x09a2, False),                           # Intel Ice Lake / Sapphire Rapids VT-d
    (0x8086, 0x0b25, False), (0x8086, 0x0cfe, False),  # Intel DSA / IAX (Sapphire Rapids)
    (0x8086, 0x11fb, False), (0x8086, 0x1212, False), (0x8086, 0x1216, False),  # DSA / IAA
    (0x8086, 0x4940, False), (0x8086, 0x4942, False), (0x8086, 0x4944, False),  # Intel QAT
    (0x8086, 0x4946, False), (0x8086, 0x4948, False),
    (0x1AE0, None, False),                             # Google SoCs
    (0x10DE, 0x2f95, False), (0x10DE, 0x2f96, False),  # NVIDIA CPUs
    (0x10DE, 0x2f97, False), (0x10DE, 0x2f98, False),
)
ORIGINAL_ENTRIES = 9

# The map types, named as the report shows them (the kernel's PCI_P2PDMA_MAP_*).
BUS_ADDRESS = "bus_address"         # PCI_P2PDMA_MAP_BUS_ADDR: routed in the switch
HOST_BRIDGE = "host_bridge"         # PCI_P2PDMA_MAP_THRU_HOST_BRIDGE
REFUSED = "refused"                 # PCI_P2PDMA_MAP_NOT_SUPPORTED
UNKNOWN = "unknown"                 # a register or fact this decision needs could not be read
ALLOWED = (BUS_ADDRESS, HOST_BRIDGE)


def upward(tree, bdf):
    """The function and the bridges above it, nearest first, as ``pci_upstream_bridge`` walks
    them: up to the first root bus (a VMD domain's root bus ends the walk too)."""
    chain = tree.devices[bdf].chain
    out = []
    for element in reversed(chain):
        if is_root_bus(element):
            break
        out.append(element)
    return out


def root_bus(tree, bdf):
    """The root bus (``pciDDDD:BB``) whose host bridge the function sits under."""
    for element in reversed(tree.devices[bdf].chain):
        if is_root_bus(element):
            return element
    return None


def host_bridge_device(tree, bus):
    """The function the kernel takes for a host bridge: devfn 00.0 on its root bus, or None."""
    bdf = "%s:00.0" % bus[3:]
    dev = tree.devices.get(bdf)
    return dev if dev is not None and dev.chain[0] == bus else None


def cpu_allows(cpu):
    """cpu_supports_p2pdma(): an AMD CPU of family 17h (Zen) or later; None when unread."""
    cpu = cpu if isinstance(cpu, dict) else {}
    vendor, family = cpu.get("vendor"), cpu.get("family")
    if vendor is None:
        return None
    if vendor != "AuthenticAMD":
        return False
    if not isinstance(family, int):
        return None
    return family >= AMD_ZEN_FAMILY


def whitelist_entry(vendor, device):
    """(index, same_host_bridge_only) of the whitelist entry for a host bridge device, or None."""
    for index, (w_vendor, w_device, same_only) in enumerate(HOST_BRIDGE_WHITELIST):
        if vendor == w_vendor and w_device in (None, device):
            return index, same_only
    return None


def _host_bridge_verdict(tree, provider, client, kernel):
    """(allowed, reason): host_bridge_whitelist() for the two functions; allowed None when only a
    newer kernel's list than the node's has the entry."""
    buses = [root_bus(tree, provider), root_bus(tree, client)]
    same = buses[0] == buses[1]
    reasons = []
    unsure = []
    for bus in sorted(set(buses)):
        dev = host_bridge_device(tree, bus)
        if dev is None:
            reasons.append("%s has no device 00.0 to whitelist" % bus)
            continue
        name = "%s %04x:%04x" % (dev.bdf, dev.vendor, dev.device)
        entry = whitelist_entry(dev.vendor, dev.device)
        if entry is None:
            reasons.append("host bridge %s not whitelisted" % name)
        elif entry[1] and not same:
            reasons.append("host bridge %s whitelisted under one host bridge only" % name)
        elif entry[0] >= ORIGINAL_ENTRIES and (not kernel or tuple(kernel) < WHITELIST_KERNEL):
            unsure.append("host bridge %s on Linux %s's whitelist, not the original one; kernel %s may lack it"
                          % (name, ".".join(map(str, WHITELIST_KERNEL)),
                             ".".join(map(str, kernel)) if kernel else "unknown"))
    if reasons:
        return False, "; ".join(reasons)
    if unsure:
        return None, "; ".join(unsure)
    return True, "host bridge%s %s whitelisted" % ("" if same else "s", ", ".join(sorted(set(buses))))


def acs_redirect(tree, bdf, known=None):
    """(True when the function's ACS Control has a redirect bit, False without one or without
    ACS, None when its config space cannot be read; that reason). ``known``: a dict of the
    answers so far (one read and one warning a function, however many pairs cross it)."""
    if known is not None and bdf in known:
        return known[bdf]
    state = tree.acs(bdf)
    if state.get("acs_unknown"):
        answer = None, state["acs_unknown"]
    else:
        answer = bool((state.get("acs_ctrl") or 0) & ACS_REDIRECT), None
    if known is not None:
        known[bdf] = answer
    return answer


def map_type(tree, provider, client, cpu=None, kernel=None, known=None):
    """The kernel's decision for DMA from ``client`` into ``provider``'s memory, as a dict:
    ``map`` (bus_address, host_bridge, refused or unknown), ``distance`` (the kernel's hop count),
    ``common`` (the common upstream bridge or None), ``acs_redirect`` (functions with a redirect
    bit, in the kernel's order: ``kernel_parameter`` makes the parameter that clears them),
    ``reason``. ``known``: see acs_redirect."""
    up_a, up_b = upward(tree, provider), upward(tree, client)
    listed, unreadable = [], []
    common = None
    for dist_a, element in enumerate(up_a):
        redirect, why = acs_redirect(tree, element, known)
        if redirect is None:
            unreadable.append(why)
        elif redirect:
            listed.append(element)
        if element in up_b:
            common = element
            distance = dist_a + up_b.index(element)
            break
    else:
        distance = len(up_a) + len(up_b)
    if common is not None:
        for element in up_b[:up_b.index(common)]:
            redirect, why = acs_redirect(tree, element, known)
            if redirect is None:
                unreadable.append(why)
            elif redirect:
                listed.append(element)
    out = {"provider": provider, "client": client, "distance": distance, "common": common,
           "acs_redirect": listed if common is not None else []}
    if unreadable and common is not None:
        return dict(out, map=UNKNOWN, reason="ACS Control unreadable: %s" % "; ".join(unreadable))
    if common is not None and not listed:
        return dict(out, map=BUS_ADDRESS, reason="below %s, no ACS redirect" % common)
    why = "ACS redirect below %s" % common if common is not None else "no common upstream bridge"
    by_cpu = cpu_allows(cpu)
    if by_cpu:
        return dict(out, map=HOST_BRIDGE, reason="%s; AMD Zen CPU" % why)
    allowed, bridge_reason = _host_bridge_verdict(tree, provider, client, kernel)
    if allowed:
        return dict(out, map=HOST_BRIDGE, reason="%s; %s" % (why, bridge_reason))
    if allowed is None or by_cpu is None:
        unread = "CPU vendor or family unread" if by_cpu is None else None
        return dict(out, map=UNKNOWN, reason="; ".join(r for r in (why, unread, bridge_reason) if r))
    return dict(out, map=REFUSED, reason="%s; %s; CPU not AMD Zen" % (why, bridge_reason))


def kernel_parameter(pair):
    """``pci=disable_acs_redir=<functions>``: what the kernel itself suggests for a pair refused
    for ACS redirect (the functions as it lists them); None without any."""
    listed = pair.get("acs_redirect") if isinstance(pair, dict) else None
    return "pci=disable_acs_redir=%s" % ";".join(map(str, listed)) if isinstance(listed, list) and listed else None


def providers_and_clients(tree, gpus, nvme, nics):
    """(providers, clients) to judge: providers are the GPUs (GDS's P2PDMA target) and every
    function that publishes p2pmem (e.g. an NVMe controller memory buffer); clients are the data
    drives' controllers and the NICs, the functions that move the data."""
    providers = [g["bdf"] for g in gpus if g.get("bdf") in tree.devices]
    providers += [bdf for bdf in sorted(tree.devices, key=bdf_key)
                  if bdf not in providers and tree.publishes_p2pmem(bdf)]
    clients = [bdf for d in nvme if not d.get("system") for bdf in controller_bdfs(d)]
    clients += [n["bdf"] for n in nics if n.get("bdf")]
    seen = set()
    clients = [bdf for bdf in clients if bdf in tree.devices and not (bdf in seen or seen.add(bdf))]
    return providers, clients


def pairs(tree, gpus, nvme, nics, cpu=None, kernel=None):
    """The ``p2pdma`` topology facts: the kernel's decision for every provider/client pair, with
    what it was decided from."""
    providers, clients = providers_and_clients(tree, gpus, nvme, nics)
    known = {}
    return {
        "cpu_allows": cpu_allows(cpu),
        "whitelist": WHITELIST_SOURCE,
        "providers": providers,
        "pairs": [map_type(tree, provider, client, cpu, kernel, known) for provider in providers for client in clients],
    }
