"""P2PDMA on a real kernel: the product's prediction for every pair held against the kernel's answer.

The QEMU guest (scripts/vm) runs Debian's 7.3.4 kernel (CONFIG_PCI_P2PDMA=y); every data drive has
a Controller Memory Buffer that the nvme driver publishes as p2pmem. For every provider (a drive's
CMB) and client (a drive holding a file) gdsbench reads the file with O_DIRECT into the provider's
``p2pmem/allocate`` (``--peer-memory``) and checks every byte; the kernel either moves the data
peer to peer or refuses the pair and says why in its log. Before that, the product's gds_topology
module, run in the guest through Ansible, predicted each pair (hw/p2pdma.py). Both must agree.

Two boots, each changing what the kernel decides on:
- ``-cpu max`` (QEMU's TCG CPU: AuthenticAMD family 15, before Zen) with ``iommu=pt``: drives below
  one switch route by bus address; across root ports the q35 host bridge (8086:29c0) is not on the
  kernel's whitelist, so they are refused; the ACS pair (vmctl.ACS_PAIR: two pcie-root-ports whose
  ACS Control the kernel sets at boot) is refused for ACS redirect, then allowed once the product's
  pcie_acs module cleared ACS on its bridges (the provider's driver rebound: the kernel keeps its
  decision per pair until then).
- ``-cpu EPYC`` (family 17h) with the IOMMU translating: every pair is allowed, the non-switch ones
  through the host bridge. Here QEMU differs from hardware, and the test says so rather than
  guessing: a bus-address transfer never reaches a real IOMMU (the switch routes it), but QEMU
  sends every DMA of an emulated device through its emulated IOMMU, which faults it (DMAR "PTE
  Write access is not set"); the read then returns success with no data, which gdsbench's verify
  catches. Those pairs are asserted to be exactly the predicted bus-address ones.

Runs in `make vm-p2p` (part of `make test` where QEMU is installed); skipped elsewhere.
"""
import json
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "vm"))
import vmctl  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("GDS_VM_P2P") != "1",
                                reason="QEMU guest test: runs in `make vm-p2p` (GDS_VM_P2P=1)")

GDSBENCH = os.path.join(ROOT, "collections", "ansible_collections", "gds", "commission", "roles", "gds_bench",
                        "files", "bench", "gdsbench-nocuda")
APPEND = "root=LABEL=gds-root ro console=ttyS0,115200 mitigations=off panic=10 intel_iommu=on"
FILE_MB = 4
REFUSAL = "cannot be used for peer-to-peer DMA as the client and provider (%s)"
ACS_WARNING = "ACS redirect is set between the client and provider (%s)"


class Guest(object):
    def __init__(self, run_dir, st):
        self.run_dir, self.st = run_dir, st

    def sh(self, script, check=True, timeout=600):
        base = vmctl.ssh_base(self.run_dir, self.st["port"])
        proc = subprocess.run(base + ["bash -euo pipefail -s"], input=script, capture_output=True, text=True,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError("guest script failed (rc %d):\n%s\nstderr:\n%s" % (proc.returncode, script,
                                                                                    proc.stderr[-3000:]))
        return proc.stdout

    def put(self, local, remote):
        base = vmctl.ssh_base(self.run_dir, self.st["port"])
        with open(local, "rb") as f:
            subprocess.run(base + ["cat > %s && chmod 0755 %s" % (remote, remote)], stdin=f, check=True, timeout=120)

    def module(self, name, args=None):
        """Run one of the collection's modules in the guest through Ansible, as a play would."""
        env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.posix.json",
                   ANSIBLE_HOST_KEY_CHECKING="false",
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, "collections"))
        cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "all", "-i", "127.0.0.1,",
               "-u", "root", "-e", "ansible_port=%d" % self.st["port"],
               "-e", "ansible_ssh_private_key_file=%s" % self.st["identity_file"],
               "-e", "ansible_python_interpreter=/usr/bin/python3",
               "-m", "gds.commission.%s" % name] + (["-a", json.dumps(args)] if args else [])
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        try:
            [play] = json.loads(proc.stdout)["plays"]
            result = play["tasks"][0]["hosts"]["127.0.0.1"]
        except (ValueError, KeyError, IndexError) as exc:
            raise AssertionError("ansible -m %s: no result (%s)\n%s\n%s"
                                 % (name, exc, proc.stdout[-2000:], proc.stderr[-2000:]))
        assert not result.get("failed"), "%s failed: %s" % (name, result.get("msg"))
        return result


def drives(guest):
    """{bdf: serial} of the data drives (all but the OS drive)."""
    out = guest.sh("for c in /sys/class/nvme/nvme*; do echo $(basename $(readlink -f $c/device)) $(cat $c/serial); done")
    found = dict(line.split() for line in out.splitlines() if line.strip())
    return {bdf: serial for bdf, serial in found.items() if serial != vmctl.OS_DRIVE}


def prepare_files(guest, by_bdf):
    """A file of gdsbench's verify pattern on each data drive's own ext4, mounted at /mnt/p2p/SERIAL."""
    lines = []
    for bdf, serial in sorted(by_bdf.items()):
        lines.append("dev=/dev/$(basename /sys/bus/pci/devices/%s/nvme/nvme*/nvme*n1)" % bdf)
        lines.append("mkfs.ext4 -q -F $dev && mkdir -p /mnt/p2p/%s && mount $dev /mnt/p2p/%s" % (serial, serial))
        lines.append("/root/gdsbench -f /mnt/p2p/%s/pattern -x 1 -I 1 -s %dM -i 1M > /dev/null" % (serial, FILE_MB))
    guest.sh("\n".join(lines))


def transfer_all(guest, pairs, by_bdf):
    """The kernel's answer for each (provider, client): gdsbench's JSON record and the kernel log
    lines printed while it ran (a fault the IOMMU reports later lands in a later pair's lines)."""
    script = ["cat /dev/null > /tmp/p2p.out"]
    for provider, client in pairs:
        script.append(
            "n=$(dmesg | wc -l); echo '== %s %s' >> /tmp/p2p.out; "
            "/root/gdsbench -f /mnt/p2p/%s/pattern -x 1 -I 0 -s %dM -i 1M -V "
            "--peer-memory /sys/bus/pci/devices/%s/p2pmem/allocate --json - 2>/dev/null >> /tmp/p2p.out || true; "
            "echo '== log' >> /tmp/p2p.out; dmesg | tail -n +$((n + 1)) >> /tmp/p2p.out"
            % (provider, client, by_bdf[client], FILE_MB, provider))
    guest.sh("\n".join(script))
    text = guest.sh("cat /tmp/p2p.out")
    answers = {}
    for block in text.split("== ")[1:]:
        head, _, body = block.partition("\n")
        if head == "log":
            answers[last]["log"] = body
            continue
        last = tuple(head.split())
        try:
            answers[last] = {"record": json.loads(body)}
        except ValueError:
            answers[last] = {"record": None, "raw": body[-500:]}
    return answers


def kernel_moved_it(answer):
    record = answer["record"] or {}
    return (record.get("exit_code") == 0 and record.get("errors") == 0 and record.get("verify_errors") == 0
            and record.get("bytes") == FILE_MB << 20)


def predictions(guest):
    topology = guest.module("gds_topology")["ansible_facts"]["gds_topology"]
    facts = topology["p2pdma"]
    guest.topology = topology
    return facts, {(p["provider"], p["client"]): p for p in facts["pairs"]}


@pytest.fixture(scope="module")
def boot(tmp_path_factory):
    started = []

    def start(cpu, append):
        if started:
            vmctl.stop(started[-1][0], 60)
        run_dir = tmp_path_factory.mktemp("p2p-%s" % cpu)
        st = vmctl.start(run_dir, wait=420, cpu=cpu, append=append, acs_pair=True)
        started.append((run_dir, st))
        guest = Guest(run_dir, st)
        guest.put(GDSBENCH, "/root/gdsbench")
        return guest
    yield start
    for run_dir, _ in started:
        vmctl.stop(run_dir, 60)


def acs_pair_bdfs(by_bdf):
    serials = [port["drive"] for port in vmctl.ACS_PAIR["ports"]]
    return [bdf for bdf, serial in sorted(by_bdf.items()) if serial in serials]


def test_kernel_answers_as_predicted_before_zen_and_after_clearing_acs(boot):
    guest = boot("max", APPEND + " iommu=pt")
    by_bdf = drives(guest)
    prepare_files(guest, by_bdf)
    facts, predicted = predictions(guest)
    assert facts["cpu_allows"] is False, "QEMU's max CPU under TCG is AMD family 15: %s" % facts
    assert sorted(facts["providers"]) == sorted(by_bdf), "every data drive's CMB is a provider"
    pairs = sorted(predicted)
    assert len(pairs) == len(by_bdf) ** 2, "a prediction for every provider and client"
    answers = transfer_all(guest, pairs, by_bdf)
    kinds = {}
    for pair in pairs:
        p, a = predicted[pair], answers[pair]
        kinds[p["map"]] = kinds.get(p["map"], 0) + 1
        assert p["map"] in ("bus_address", "refused"), "max CPU, q35 host bridge: %s" % p
        if p["map"] == "bus_address":
            assert kernel_moved_it(a), "predicted %s, the kernel did not move it: %s" % (p, a)
        else:
            assert not kernel_moved_it(a), "predicted refused (%s), the kernel moved it" % p["reason"]
            assert REFUSAL % pair[0] in a["log"], "no refusal in the kernel log for %s: %s" % (pair, a["log"])
    # From the layout alone (vmctl): a drive with itself and drives below one switch.
    switch = {serial: sw["id"] for sw in vmctl.topology()["switches"] for serial in sw["drives"]}
    expected = [(p, c) for p, c in pairs
                if p == c or switch.get(by_bdf[p], p) == switch.get(by_bdf[c], c)]
    assert sorted(pair for pair in pairs if predicted[pair]["map"] == "bus_address") == expected, kinds

    # The product's own probe (module gds_p2pdma_probe, as the gds_bench role runs it) reaches the
    # same answers and judges every one of them as agreeing with its prediction.
    name_of = {d["paths"][0]["bdf"]: d["name"] for d in guest.topology["nvme"] if not d["system"]}
    arrays = [{"mount": "/mnt/p2p/%s" % serial, "members": [name_of[bdf]], "label": serial}
              for bdf, serial in sorted(by_bdf.items())]
    result = guest.module("gds_p2pdma_probe", {"binary": "/root/gdsbench", "arrays": arrays,
                                               "topology": guest.topology, "size_mb": FILE_MB})
    assert len(result["checks"]) == len(pairs), result["checks"][:3]
    assert {c["verdict"] for c in result["checks"]} == {"PASS"}, [c for c in result["checks"] if c["verdict"] != "PASS"]
    for answer in result["answers"]:
        pair = (answer["provider"], answer["clients"][0])
        assert answer["moved"] == kernel_moved_it(answers[pair]), (answer, answers[pair])
        if not answer["moved"]:  # the refusal itself was logged at the pair's first transfer (above);
            # the kernel keeps its decision and fails the I/O (its block error lines are rate-limited)
            assert "Invalid argument" in answer["error"], answer
    assert guest.sh("ls -A /mnt/p2p/*/ | grep -c gds-bench || true").strip() == "0"  # nothing left behind

    # The ACS pair: the kernel set ACS at boot (the IOMMU is on), so it is refused for ACS and
    # names the bridges; the product names the same ones.
    acs_a, acs_b = acs_pair_bdfs(by_bdf)
    p = predicted[(acs_a, acs_b)]
    assert p["map"] == "refused" and p["acs_redirect"], p
    log = answers[(acs_a, acs_b)]["log"]
    assert ACS_WARNING % acs_a in log, log
    assert "pci=disable_acs_redir=%s" % ";".join(p["acs_redirect"]) in log, (p, log)

    # The product clears ACS on the pair's bridges; the kernel decides again once the providers'
    # driver is rebound.
    bridges = sorted(set(p["acs_redirect"]))
    result = guest.module("pcie_acs", {"state": "disabled", "bridges": bridges})
    assert result.get("changed"), result
    guest.sh("\n".join(
        ["umount /mnt/p2p/%s" % by_bdf[b] for b in (acs_a, acs_b)]
        + ["echo %s > /sys/bus/pci/drivers/nvme/unbind; echo %s > /sys/bus/pci/drivers/nvme/bind" % (b, b)
           for b in (acs_a, acs_b)]
        + ["udevadm settle -t 60"]
        + ["mount /dev/$(basename /sys/bus/pci/devices/%s/nvme/nvme*/nvme*n1) /mnt/p2p/%s" % (b, by_bdf[b])
           for b in (acs_a, acs_b)]))
    facts, predicted = predictions(guest)
    pairs = [(acs_a, acs_b), (acs_b, acs_a)]
    answers = transfer_all(guest, pairs, by_bdf)
    for pair in pairs:
        p = predicted[pair]
        assert p["map"] == "bus_address" and not p["acs_redirect"], p
        assert kernel_moved_it(answers[pair]), "ACS cleared, predicted bus address: %s" % answers[pair]


def test_kernel_answers_as_predicted_on_zen_with_the_iommu_translating(boot):
    guest = boot("EPYC", APPEND)
    # The P2PDMA prerequisites as gds_platform reads them from the running kernel: its config,
    # its symbols (root reads kallsyms), its version.
    p2p = guest.module("gds_platform", {"block_devices": []})["ansible_facts"]["gds_platform"]["p2pdma"]
    assert (p2p["kernel"], p2p["config"], p2p["pgmap_ops"], p2p["built_in"], p2p["kernel_supported"]) == \
        (True, True, True, True, True), p2p
    by_bdf = drives(guest)
    prepare_files(guest, by_bdf)
    facts, predicted = predictions(guest)
    assert facts["cpu_allows"] is True, "QEMU's EPYC is AMD family 17h: %s" % facts
    answers = transfer_all(guest, sorted(predicted), by_bdf)
    faulted = []
    for pair, p in sorted(predicted.items()):
        a = answers[pair]
        assert p["map"] in ("bus_address", "host_bridge"), "a Zen CPU allows every pair: %s" % p
        assert REFUSAL % pair[0] not in a["log"], "the kernel refused %s: %s" % (pair, a["log"])
        if p["map"] == "host_bridge":
            assert kernel_moved_it(a), "predicted through the host bridge, not moved: %s %s" % (p, a)
        elif not kernel_moved_it(a):
            faulted.append(pair)
    # QEMU's emulated IOMMU translates what a real switch would route (see the docstring): the
    # bus-address pairs between two drives, and only those, lose their data, and it says why.
    crossing = sorted(pair for pair, p in predicted.items() if p["map"] == "bus_address" and pair[0] != pair[1])
    assert faulted == crossing, "faulted %s, predicted bus-address pairs of two drives %s" % (faulted, crossing)
    # md RAID0 over the two drives of switch 2, read into a drive's memory behind another root
    # port: what the running kernel's md can do, asked with the product's probe.
    sw2 = sorted(bdf for bdf, serial in by_bdf.items() if serial in vmctl.ROOT_PORTS[2]["drives"])
    names = {d["paths"][0]["bdf"]: d["name"] for d in guest.topology["nvme"]}
    guest.sh("\n".join(["umount /mnt/p2p/%s" % by_bdf[b] for b in sw2] + [
        "mdadm --create /dev/md/p2p --run --level=0 --raid-devices=2 %s" % " ".join("/dev/" + names[b] for b in sw2),
        "mkfs.ext4 -q -F /dev/md/p2p && mkdir -p /mnt/p2p/md && mount /dev/md/p2p /mnt/p2p/md"]))
    keep = next(bdf for bdf, serial in by_bdf.items() if serial == "gds-keep")
    result = guest.module("gds_p2pdma_probe", {
        "binary": "/root/gdsbench", "topology": dict(guest.topology, p2pdma=dict(facts, providers=[keep])),
        "arrays": [{"mount": "/mnt/p2p/md", "members": [names[b] for b in sw2], "label": "md-raid0"}]})
    [answer] = result["answers"]
    assert answer["predicted"] == "host_bridge" and answer["moved"], answer
    assert [c["verdict"] for c in result["checks"]] == ["PASS"], result["checks"]
    print("md RAID0 into %s's memory: %s bytes in %s s, verified" % (keep, answer["bytes"], answer["seconds"]))

    record = answers[faulted[0]]["record"]
    assert record["verify_errors"] > 0 and record["errors"] == 0, record  # success, without the data
    log = guest.sh("dmesg")
    faults = set(re.findall(r"DMAR: \[DMA Write[^\]]*\] Request device \[([0-9a-f:.]+)\]", log))
    assert faults and faults <= {client for _, client in faulted}, (faults, faulted)
    print("bus-address pairs QEMU's emulated IOMMU faulted: %s" % shlex.join("%s<-%s" % p for p in faulted))
