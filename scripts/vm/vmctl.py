#!/usr/bin/env python3
"""Start, stop and reach the QEMU test guest of the molecule `vm` scenario (stdlib only).

    vmctl.py start  --run-dir DIR [--image-dir DIR] [--port N] [--wait S] [--accel tcg|kvm|auto]
    vmctl.py stop   --run-dir DIR [--timeout S]      power off (ACPI), then kill; keeps the disks
    vmctl.py reboot --run-dir DIR [--wait S]         clean shutdown, boot what the guest's grub.cfg names
    vmctl.py status --run-dir DIR                    JSON: running, pid, port
    vmctl.py ssh    --run-dir DIR [-- CMD...]        root shell / command in the guest
    vmctl.py throttle --run-dir DIR SERIAL [--bps-rd N] [--iops-rd N] ... | --off
                                                     QEMU I/O throttling of one NVMe drive (a slow drive)
    vmctl.py topology                                 the PCIe layout, as JSON

The guest boots from a copy-on-write overlay of the cached base image (scripts/vm/build-image.sh)
with the cached kernel and initrd, on q35 with an emulated Intel IOMMU, and gets:

    00:04.0 root port -> nvme  serial gds-os      the OS disk (ext4 root, label gds-root)
    00:05.0 root port -> x3130 switch 1 -> 2 downstream ports -> nvme gds-sw1-a, gds-sw1-b
                                          + 3rd downstream port -> virtio-net gds-nic1 (soft-RoCE rxe0)
    00:06.0 root port -> x3130 switch 2 -> 2 downstream ports -> nvme gds-sw2-a, gds-sw2-b
    00:07.0 root port -> 0b:00.0 root port -> nvme gds-keep   extra data drive behind no switch;
                         the link between the two ports (both x4 8 GT/s) trains at x1 2.5 GT/s
    00:02.0 virtio-net on user networking; SSH forwarded from 127.0.0.1:PORT only
    gds-nic1: a second virtio-net on its own restricted user network (no way out), with fixed
              addresses (guest/etc/systemd/network/10-gds-rdma.network) for rxe0 and NFS

Everything of one run lives in --run-dir: the SSH key pair (generated here once per run dir and
handed to the guest through fw_cfg), the overlay and data disks, console.log, the QMP socket and
vm.json. `stop` leaves the disks so that a restarted guest finds its arrays; removing the run dir
removes the run. Nothing here touches a host disk: the drives are image files in --run-dir.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# PCIe layout (contract for tests/vm and inventory/vm): root port address -> what sits below it.
# `link`: a root port's Link Capabilities as QEMU's x-speed / x-width (GT/s, lanes); in QEMU 7.2
# (Debian bookworm) only pcie-root-port has them. Every emulated device (NVMe, x3130 ports) is x1
# 2.5 GT/s, and a port's Link Status follows the device below it (hw/pci/pcie.c
# pcie_sync_bridge_lnk), so every link trains at x1 2.5 GT/s. A link is degraded only when both
# of its ends can do more: the one such link is between rp3 and a second root port (`inner`,
# x4 8 GT/s too) that QEMU lets sit below it, above the gds-keep drive. The other root ports are
# capped at x1 2.5 GT/s, so no port shows a capability beyond its link but rp3.
# QEMU 7.2's xio3130-downstream leaves its Link Capabilities at 0: the kernel shows
# max_link_width 0 and max_link_speed "Unknown" there, an unknown link, not a degraded one.
ROOT_PORTS = [
    {"id": "rp0", "addr": "0x4", "chassis": 1, "drives": ["gds-os"], "link": ("2_5", 1)},
    {"id": "rp1", "addr": "0x5", "chassis": 2, "switch": "sw1", "drives": ["gds-sw1-a", "gds-sw1-b"],
     "link": ("2_5", 1)},
    {"id": "rp2", "addr": "0x6", "chassis": 3, "switch": "sw2", "drives": ["gds-sw2-a", "gds-sw2-b"],
     "link": ("2_5", 1)},
    {"id": "rp3", "addr": "0x7", "chassis": 4, "drives": ["gds-keep"], "link": ("8", 4),
     "inner": {"id": "rp3in", "chassis": 5, "link": ("8", 4)}},
]
# The second NIC: a virtio-net function on a third downstream port of switch 1, next to that
# switch's drives, so its link class to them is PIX. The guest has no GPU: the NIC stands where a
# GPU's NIC would sit on a DGX switch. The guest's network file (10-gds-rdma.network) matches the
# MAC and sets the addresses; `rdma link add rxe0 type rxe netdev <if>` puts soft-RoCE on it.
RDMA_NIC = {"id": "gds-nic1", "switch": "sw1", "mac": "52:54:00:d5:00:01", "net": "10.0.3.0/24",
            "addresses": ["10.0.3.15", "10.0.3.16"], "rdma_dev": "rxe0"}

# For the P2PDMA bench only (`start --acs-pair`, tests/integration/test_guest_p2pdma.py): a fifth
# root port with two pcie-root-ports below it as functions 0 and 1 (they have ACS, the x3130
# ports do not) and a drive below each. The two drives' paths meet at that root port below two
# ACS-capable ports: the one place in the guest where ACS decides a pair for the kernel. The
# scenario `vm` does not boot with it, so its layout above stays the contract of tests/vm.
ACS_PAIR = {"id": "rp9", "addr": "0x9", "chassis": 9,
            "ports": [{"id": "rp9a", "chassis": 30, "drive": "gds-acs-a"},
                      {"id": "rp9b", "chassis": 31, "drive": "gds-acs-b"}]}


def acs_pair_args() -> list[str]:
    args = ["-device", f"pcie-root-port,id={ACS_PAIR['id']},bus=pcie.0,addr={ACS_PAIR['addr']},"
                       f"chassis={ACS_PAIR['chassis']},slot=0"]
    for function, port in enumerate(ACS_PAIR["ports"]):
        multi = ",multifunction=on" if function == 0 else ""
        args += ["-device", f"pcie-root-port,id={port['id']},bus={ACS_PAIR['id']},addr=00.{function},"
                            f"chassis={port['chassis']},slot=0{multi}"]
        args += drive_args(port["drive"], port["id"])
    return args


# What every emulated link trains at, and what QEMU's NVMe and x3130 upstream ports can do.
TRAINED_LINK = {"width": 1, "speed_gts": 2.5}


def _max_link(port: dict) -> dict:
    speed, width = port["link"]
    return {"width": width, "speed_gts": float(speed.replace("_", "."))}


def _degraded(a: dict, b: dict) -> bool:
    """A link trained at TRAINED_LINK whose ends can do a and b: below the best both support?"""
    return (min(a["width"], b["width"]) > TRAINED_LINK["width"]
            or min(a["speed_gts"], b["speed_gts"]) > TRAINED_LINK["speed_gts"])


DATA_DISK_SIZE = os.environ.get("GDS_VM_DATA_SIZE", "2G")
# Every data drive has a Controller Memory Buffer, which the guest's nvme driver publishes as
# peer-to-peer memory (/sys/bus/pci/devices/<bdf>/p2pmem): a real P2PDMA provider for each drive.
CMB_MB = 16
OS_DRIVE = "gds-os"
# The first boot's command line; guest/etc/default/grub has the same GRUB_CMDLINE_LINUX, so a
# reboot through the guest's grub.cfg boots with it plus whatever grub.d drop-ins add.
# (mitigations=off: TCG is slow enough already, and this guest is thrown away.)
DEFAULT_APPEND = "root=LABEL=gds-root ro console=ttyS0,115200 intel_iommu=on mitigations=off panic=10"


def log(msg: str) -> None:
    print(f"vmctl: {msg}", file=sys.stderr, flush=True)


def die(msg: str, code: int = 1) -> None:
    log(f"ERROR: {msg}")
    sys.exit(code)


def topology() -> dict:
    """BDF-level description of the guest's PCIe tree as the firmware numbers it."""
    out = {"root_ports": [], "switches": [], "drives": {}, "nics": {}}
    bus = 1
    for rp in ROOT_PORTS:
        bdf = f"0000:00:{int(rp['addr'], 16):02x}.0"
        below = _max_link(rp["inner"]) if "inner" in rp else TRAINED_LINK
        entry = {"bdf": bdf, "id": rp["id"], "secondary_bus": bus, "acs": True, "max_link": _max_link(rp),
                 "current_link": dict(TRAINED_LINK), "degraded": _degraded(_max_link(rp), below)}
        out["root_ports"].append(entry)
        if "inner" in rp:
            inner = rp["inner"]
            out["root_ports"].append({"bdf": f"0000:{bus:02x}:00.0", "id": inner["id"], "secondary_bus": bus + 1,
                                      "acs": True, "max_link": _max_link(inner), "current_link": dict(TRAINED_LINK),
                                      "degraded": _degraded(_max_link(inner), TRAINED_LINK), "parent": bdf})
            bus += 1
        if "switch" in rp:
            up_bus = bus
            sw = {"id": rp["switch"], "upstream": f"0000:{up_bus:02x}:00.0", "root_port": bdf,
                  "downstream": [], "drives": list(rp["drives"])}
            bus += 1  # bus of the upstream port's secondary side (downstream ports live there)
            for i, serial in enumerate(rp["drives"]):
                ds = f"0000:{bus:02x}:{i:02x}.0"
                sw["downstream"].append(ds)
            for serial in rp["drives"]:
                bus += 1
                out["drives"][serial] = {"bdf": f"0000:{bus:02x}:00.0", "switch": rp["switch"],
                                         "root_port": bdf}
            sw["nics"], sw["nic_ports"] = [], []
            if RDMA_NIC["switch"] == rp["switch"]:
                # its downstream port comes after the drives' (next device number, next bus)
                bus += 1
                port = f"0000:{up_bus + 1:02x}:{len(rp['drives']):02x}.0"
                out["nics"][RDMA_NIC["id"]] = {"bdf": f"0000:{bus:02x}:00.0", "switch": rp["switch"],
                                               "root_port": bdf, "downstream": port, "mac": RDMA_NIC["mac"],
                                               "addresses": list(RDMA_NIC["addresses"]),
                                               "rdma_dev": RDMA_NIC["rdma_dev"]}
                sw["nics"].append(RDMA_NIC["id"])
                sw["nic_ports"].append(port)
            out["switches"].append(sw)
            bus += 1
        else:
            out["drives"][rp["drives"][0]] = {"bdf": f"0000:{bus:02x}:00.0", "switch": None,
                                              "root_port": bdf}
            bus += 1
    out["degraded_links"] = [rp["bdf"] for rp in out["root_ports"] if rp["degraded"]]
    # nvidia-smi's class of the NIC's link to each drive: PIX below its own switch, else PHB
    # (every root port hangs off the one q35 host bridge). The guest has no GPU to pair the NIC
    # with; this is what its topology can show.
    for nic in out["nics"].values():
        nic["link_class"] = {serial: "PIX" if d["switch"] == nic["switch"] else "PHB"
                             for serial, d in out["drives"].items()}
    return out


def qemu_device_args() -> list[str]:
    args: list[str] = []
    for rp in ROOT_PORTS:
        speed, width = rp["link"]
        args += ["-device", f"pcie-root-port,id={rp['id']},bus=pcie.0,addr={rp['addr']},"
                            f"chassis={rp['chassis']},slot=0,x-speed={speed},x-width={width}"]
        if "inner" in rp:
            inner = rp["inner"]
            speed, width = inner["link"]
            args += ["-device", f"pcie-root-port,id={inner['id']},bus={rp['id']},"
                                f"chassis={inner['chassis']},slot=0,x-speed={speed},x-width={width}"]
            args += drive_args(rp["drives"][0], inner["id"])
            continue
        if "switch" in rp:
            sw = rp["switch"]
            args += ["-device", f"x3130-upstream,id={sw}up,bus={rp['id']}"]
            for i, serial in enumerate(rp["drives"]):
                args += ["-device", f"xio3130-downstream,id={sw}p{i},bus={sw}up,"
                                    f"chassis={10 + rp['chassis']},slot={i}"]
                args += drive_args(serial, f"{sw}p{i}")
            if RDMA_NIC["switch"] == sw:
                i = len(rp["drives"])
                args += ["-device", f"xio3130-downstream,id={sw}p{i},bus={sw}up,"
                                    f"chassis={10 + rp['chassis']},slot={i}"]
                args += nic_args(f"{sw}p{i}")
        else:
            args += drive_args(rp["drives"][0], rp["id"])
    return args


def drive_args(serial: str, bus: str) -> list[str]:
    fmt_file = f"{serial}.qcow2"
    # cache=unsafe: the guest's flushes are not forwarded; the image files live only as long
    # as the run and QEMU flushes them on a clean exit.
    cmb = "" if serial == OS_DRIVE else f",cmb_size_mb={CMB_MB}"
    return ["-drive", f"file={fmt_file},if=none,id=drv-{serial},format=qcow2,cache=unsafe,discard=unmap",
            "-device", f"nvme,drive=drv-{serial},serial={serial},bus={bus}{cmb}"]


def nic_args(bus: str) -> list[str]:
    # restrict=on: the guest cannot reach the host or beyond through it; the traffic that
    # matters (RoCE, NFS) goes to the guest's own addresses and never leaves the guest.
    return ["-netdev", f"user,id=net1,net={RDMA_NIC['net']},restrict=on,ipv6=off",
            "-device", f"virtio-net-pci,netdev=net1,mac={RDMA_NIC['mac']},bus={bus},romfile="]


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def qmp_path(run_dir: Path) -> Path:
    p = run_dir / "qmp.sock"
    if len(str(p)) < 100:
        return p
    digest = hashlib.sha256(str(run_dir).encode()).hexdigest()[:12]
    return Path("/tmp") / f"gds-vm-{digest}.qmp"


def qmp_message(command: str | tuple[str, dict]) -> dict:
    """One QMP command: a name, or (name, arguments)."""
    if isinstance(command, str):
        return {"execute": command}
    name, arguments = command
    return {"execute": name, "arguments": dict(arguments)}


def qmp(run_dir: Path, *commands: str | tuple[str, dict], timeout: float = 5.0) -> list[dict]:
    """Send QMP commands (names, or (name, arguments)); return their replies (events skipped)."""
    replies = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(qmp_path(run_dir)))
        f = s.makefile("rw")
        json.loads(f.readline())  # greeting
        for cmd in ("qmp_capabilities", *commands):
            f.write(json.dumps(qmp_message(cmd)) + "\n")
            f.flush()
            while True:
                line = f.readline()
                if not line:
                    return replies
                msg = json.loads(line)
                if "event" in msg:
                    continue
                replies.append(msg)
                break
    return replies


def state(run_dir: Path) -> dict:
    p = run_dir / "vm.json"
    return json.loads(p.read_text()) if p.exists() else {}


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie is not alive; /proc/PID/stat field 3 is the state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True


def read_pid(run_dir: Path) -> int | None:
    try:
        return int((run_dir / "qemu.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def probe_kvm(qemu: str, image_dir: Path, seconds: int = 20) -> bool:
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    cmd = [qemu, "-accel", "kvm", "-machine", "q35", "-m", "512", "-nodefaults", "-display", "none",
           "-no-reboot", "-serial", "stdio", "-kernel", str(image_dir / "vmlinuz"),
           "-append", "console=ttyS0 panic=-1 rdinit=/nonexistent root=/dev/null"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds)
        out = p.stdout
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
    ok = "Kernel panic" in out or "VFS" in out or "Run /init" in out or "No working init" in out
    log(f"KVM probe: {'guest kernel ran' if ok else 'guest kernel did not run'} under KVM")
    return ok


def ensure_key(run_dir: Path) -> Path:
    key = run_dir / "id_ed25519"
    if not key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gds-vm-run", "-f", str(key)])
    return key


def ssh_base(run_dir: Path, port: int) -> list[str]:
    return ["ssh", "-q", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR",
            "-i", str(run_dir / "id_ed25519"), "-p", str(port), "root@127.0.0.1"]


def wait_ssh(run_dir: Path, port: int, pid: int, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not pid_alive(pid):
            tail = (run_dir / "console.log").read_text(errors="replace")[-3000:]
            die(f"QEMU exited while booting; console tail:\n{tail}")
        try:
            r = subprocess.run(ssh_base(run_dir, port) + ["true"], capture_output=True, timeout=30)
            if r.returncode == 0:
                return time.monotonic() - t0
        except subprocess.TimeoutExpired:
            pass
        time.sleep(2)
    tail = (run_dir / "console.log").read_text(errors="replace")[-3000:]
    die(f"no SSH on 127.0.0.1:{port} after {timeout:.0f} s; console tail:\n{tail}")
    return -1


def cmd_start(a: argparse.Namespace) -> None:
    st = start(Path(a.run_dir).resolve(), image_dir=a.image_dir, port=a.port, wait=a.wait, accel=a.accel,
               smp=a.smp, mem=a.mem, kernel=a.kernel, initrd=a.initrd, append=a.append, cpu=a.cpu,
               acs_pair=a.acs_pair)
    print(json.dumps(st))


def start(run_dir: Path, image_dir: str | None = None, port: int = 0, wait: float = 0, accel: str = "tcg",
          smp: int = 2, mem: int = 2048, kernel: str | None = None, initrd: str | None = None,
          append: str | None = None, cpu: str | None = None, acs_pair: bool = False) -> dict:
    """Boot the guest of run_dir (creating its disks on first use); returns vm.json's content.
    cpu: QEMU's CPU model under TCG (default GDS_VM_CPU, else max); acs_pair: add ACS_PAIR."""
    run_dir.mkdir(parents=True, exist_ok=True)
    st = state(run_dir)
    if pid_alive(read_pid(run_dir)):
        log(f"already running (pid {read_pid(run_dir)}, port {st.get('port')})")
        if wait:
            wait_ssh(run_dir, st["port"], read_pid(run_dir), wait)
        return st
    qemu = shutil.which("qemu-system-x86_64") or die("qemu-system-x86_64 not found (apt-get install qemu-system-x86)")
    image = Path(image_dir or st.get("image_dir") or
                 run(["bash", str(HERE / "build-image.sh")]).stdout.strip().splitlines()[-1])
    for f in ("rootfs.raw", "vmlinuz", "initrd.img", "ready"):
        if not (image / f).exists():
            die(f"{image / f} missing: run scripts/vm/build-image.sh")
    kernel = kernel or str(image / "vmlinuz")
    initrd = initrd or str(image / "initrd.img")
    append = append or DEFAULT_APPEND
    key = ensure_key(run_dir)

    # Disks: an overlay of the base image for the OS, fresh sparse images for the data drives.
    # Existing ones are kept (a restart after `stop` keeps the guest's state).
    os_disk = run_dir / "gds-os.qcow2"
    if not os_disk.exists():
        run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", str(image / "rootfs.raw"),
             str(os_disk)])
    extra = [port["drive"] for port in ACS_PAIR["ports"]] if acs_pair else []
    for serial in [serial for rp in ROOT_PORTS for serial in rp["drives"]] + extra:
        p = run_dir / f"{serial}.qcow2"
        if not p.exists():
            run(["qemu-img", "create", "-q", "-f", "qcow2", str(p), DATA_DISK_SIZE])

    if accel == "auto":
        accel = "kvm" if probe_kvm(qemu, image) else "tcg"
    # TCG: a large translation cache (guest Python runs through a lot of code); the CPU model is
    # the one that measured fastest for the guest's Python under TCG (GDS_VM_CPU overrides).
    tb_size = os.environ.get("GDS_VM_TB_SIZE", "512")
    accel_arg = "kvm" if accel == "kvm" else f"tcg,thread=multi,tb-size={tb_size}"
    cpu = "host" if accel == "kvm" else cpu or os.environ.get("GDS_VM_CPU", "max")

    sock = qmp_path(run_dir)
    want_port = port or st.get("port") or 0   # a restart keeps the port molecule's inventory knows
    for _attempt in range(3):
        port = want_port or free_port()
        for stale in (sock, run_dir / "qemu.pid"):
            stale.unlink(missing_ok=True)
        args = [
            qemu, "-name", "gds-vm", "-nodefaults", "-no-user-config",
            "-machine", "q35,kernel-irqchip=split", "-accel", accel_arg, "-cpu", cpu,
            "-smp", str(smp), "-m", str(mem),
            "-display", "none", "-vga", "none", "-monitor", "none",
            "-serial", "file:console.log",
            "-qmp", f"unix:{sock},server=on,wait=off",
            "-pidfile", "qemu.pid", "-daemonize",
            "-kernel", kernel, "-initrd", initrd, "-append", append,
            "-fw_cfg", f"name=opt/gds/authorized_keys,file={key}.pub",
            # The IOMMU must come before the PCI devices it translates for.
            "-device", "intel-iommu,intremap=on",
            "-netdev", f"user,id=net0,hostfwd=tcp:127.0.0.1:{port}-:22",
            # romfile=: no PXE option ROM, the kernel is loaded directly
            "-device", "virtio-net-pci,netdev=net0,addr=0x2,romfile=",
            *qemu_device_args(),
            *(acs_pair_args() if acs_pair else []),
        ]
        (run_dir / "qemu.args").write_text(" ".join(args) + "\n")
        with open(run_dir / "console.log", "a") as f:
            f.write(f"\n===== vmctl start {time.strftime('%F %T')}: {append}\n")
        t0 = time.monotonic()
        p = subprocess.run(args, cwd=run_dir, capture_output=True, text=True)
        if p.returncode == 0:
            break
        if "hostfwd" in p.stderr or "host forwarding" in p.stderr:
            log(f"port {port} taken, retrying with another")
            want_port = 0
            continue
        die(f"QEMU refused to start: {p.stderr.strip()}")
    else:
        die("no free port for SSH forwarding")
    pid = read_pid(run_dir)
    st = {"pid": pid, "port": port, "accel": accel, "image_dir": str(image), "run_dir": str(run_dir),
          "identity_file": str(key), "qmp": str(sock), "kernel": kernel, "initrd": initrd, "append": append,
          "started": time.time()}
    (run_dir / "vm.json").write_text(json.dumps(st, indent=1) + "\n")
    log(f"QEMU pid {pid} ({accel}); SSH on 127.0.0.1:{port}")
    if wait:
        took = wait_ssh(run_dir, port, pid, wait)
        st["boot_s"] = round(time.monotonic() - t0, 1)
        log(f"SSH up after {took:.0f} s")
        (run_dir / "vm.json").write_text(json.dumps(st, indent=1) + "\n")
    return st


def guest_boot_entry(run_dir: Path, port: int) -> tuple[str, str, str] | None:
    """(kernel, initrd, args) of the first entry of the guest's /boot/grub/grub.cfg, or None."""
    r = subprocess.run(ssh_base(run_dir, port) + ["cat /boot/grub/grub.cfg 2>/dev/null || true"],
                       capture_output=True, text=True, timeout=60)
    kernel = initrd = args = None
    in_entry = False
    for line in r.stdout.splitlines():
        words = line.strip().split(None, 2)
        if not words:
            continue
        if words[0] == "menuentry":
            if in_entry or kernel:
                break
            in_entry = True
        elif in_entry and words[0] in ("linux", "linuxefi") and len(words) >= 2:
            kernel, args = words[1], (words[2] if len(words) > 2 else "")
        elif in_entry and words[0] in ("initrd", "initrdefi") and len(words) >= 2:
            initrd = words[1]
        elif in_entry and words[0] == "}":
            break
    if not (kernel and initrd):
        return None
    return kernel, initrd, args


def fetch_from_guest(run_dir: Path, port: int, path: str, dest: Path) -> None:
    with open(dest, "wb") as f:
        r = subprocess.run(ssh_base(run_dir, port) + [f"cat {path}"], stdout=f, stderr=subprocess.PIPE,
                           timeout=300)
    if r.returncode != 0 or dest.stat().st_size == 0:
        die(f"could not copy {path} from the guest: {r.stderr.decode(errors='replace').strip()}")


def cmd_reboot(a: argparse.Namespace) -> None:
    """Shut the guest down cleanly and boot what its boot loader config names, as a node would.

    QEMU's own reset would reuse the -kernel/-initrd/-append of the first boot, so grub.d drop-ins
    and a rebuilt initramfs (module options) would never count. Here the kernel, the initrd and
    the command line come from the first entry of the guest's /boot/grub/grub.cfg (as written by
    update-grub); without a grub.cfg the guest boots again as the first time.
    """
    run_dir = Path(a.run_dir).resolve()
    st = state(run_dir) or die(f"no vm.json in {run_dir}")
    if not pid_alive(read_pid(run_dir)):
        die("the guest is not running")
    entry = guest_boot_entry(run_dir, st["port"])
    kernel = initrd = append = None
    if entry:
        boot = run_dir / "boot"
        boot.mkdir(exist_ok=True)
        g_kernel, g_initrd, append = entry
        kernel, initrd = str(boot / "vmlinuz"), str(boot / "initrd.img")
        # Copy them only when they differ from the cached image's (an initramfs rebuilt by a role).
        r = subprocess.run(ssh_base(run_dir, st["port"]) + [f"sha256sum {g_kernel} {g_initrd}"],
                           capture_output=True, text=True, timeout=120)
        sums = [line.split()[0] for line in r.stdout.splitlines() if line.strip()]
        image = Path(st["image_dir"])
        for i, (g_path, cached, dest) in enumerate(((g_kernel, image / "vmlinuz", kernel),
                                                   (g_initrd, image / "initrd.img", initrd))):
            if len(sums) == 2 and sums[i] == hashlib.sha256(cached.read_bytes()).hexdigest():
                shutil.copyfile(cached, dest)
            else:
                log(f"{g_path} differs from the cached image's: copying it from the guest")
                fetch_from_guest(run_dir, st["port"], g_path, Path(dest))
        log(f"boot entry from the guest's grub.cfg: {g_kernel} {append} (initrd {g_initrd})")
    else:
        log("the guest has no /boot/grub/grub.cfg: booting the first boot's kernel and command line again")
    t0 = time.monotonic()
    stop(run_dir, a.timeout)
    st2 = start(run_dir, image_dir=st["image_dir"], port=st["port"], wait=a.wait, accel=st.get("accel", "tcg"),
                smp=a.smp, mem=a.mem, kernel=kernel, initrd=initrd, append=append)
    st2["reboot_s"] = round(time.monotonic() - t0, 1)
    st2["boot_source"] = "grub.cfg" if entry else "first boot"
    (run_dir / "vm.json").write_text(json.dumps(st2, indent=1) + "\n")
    print(json.dumps(st2))


def cmd_stop(a: argparse.Namespace) -> None:
    stop(Path(a.run_dir).resolve(), a.timeout)


def stop(run_dir: Path, timeout: int) -> None:
    """ACPI power button (a clean shutdown), then QMP quit, then SIGKILL."""
    pid = read_pid(run_dir)
    if not pid_alive(pid):
        log("not running")
        return
    try:
        qmp(run_dir, "system_powerdown")
        log("ACPI power button pressed")
    except OSError as e:
        log(f"QMP unreachable ({e})")
    t0 = time.monotonic()
    while pid_alive(pid) and time.monotonic() - t0 < timeout:
        time.sleep(1)
    if pid_alive(pid):
        log(f"still running after {timeout} s: quitting QEMU")
        try:
            qmp(run_dir, "quit")
        except OSError:
            os.kill(pid, signal.SIGTERM)
        for _ in range(10):
            if not pid_alive(pid):
                break
            time.sleep(1)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)
    else:
        log(f"powered off after {time.monotonic() - t0:.0f} s")
    qmp_path(run_dir).unlink(missing_ok=True)
    log("stopped")


def cmd_status(a: argparse.Namespace) -> None:
    run_dir = Path(a.run_dir).resolve()
    st = state(run_dir)
    st["running"] = pid_alive(read_pid(run_dir))
    print(json.dumps(st))


def cmd_ssh(a: argparse.Namespace) -> None:
    run_dir = Path(a.run_dir).resolve()
    st = state(run_dir) or die(f"no vm.json in {run_dir}")
    cmd = ssh_base(run_dir, st["port"])
    if a.cmd:
        cmd += ["--", *a.cmd]
    os.execvp(cmd[0], cmd)


# block_set_io_throttle's limits (QEMU 7.2 requires all six; 0 = unlimited). A throttled request
# waits inside QEMU, after the guest's block layer has started its clock: the guest's diskstats
# show the longer service time (await) of a slow drive, which a throttle in the guest would not.
THROTTLE_LIMITS = ("bps", "bps_rd", "bps_wr", "iops", "iops_rd", "iops_wr")


def drive_qdev(blocks: list[dict], serial: str) -> str:
    """The QOM path of the NVMe device whose backend is drv-SERIAL, from query-block's reply.

    block_set_io_throttle wants the guest device (`id`); its `device` (the backend's name) is
    deprecated in QEMU 7.2, and vmctl gives the nvme devices no id, so QEMU names them by path."""
    for block in blocks:
        if block.get("device") == f"drv-{serial}":
            if not block.get("qdev"):
                die(f"drive drv-{serial} is attached to no device")
            return block["qdev"]
    die(f"no drive drv-{serial} in QEMU (drives: {', '.join(sorted(b.get('device', '?') for b in blocks))})")
    return ""


def throttle_arguments(qdev: str, limits: dict) -> dict:
    """block_set_io_throttle's arguments: the limits given, every other one 0 (off)."""
    unknown = set(limits) - set(THROTTLE_LIMITS)
    if unknown:
        raise ValueError(f"unknown throttle limit(s): {', '.join(sorted(unknown))}")
    args = {"id": qdev}
    for key in THROTTLE_LIMITS:
        value = int(limits.get(key) or 0)
        if value < 0:
            raise ValueError(f"{key} must be >= 0, got {value}")
        args[key] = value
    return args


def qmp_return(reply: dict, what: str):
    if "error" in reply:
        die(f"QMP {what}: {reply['error'].get('class')}: {reply['error'].get('desc')}")
    return reply.get("return")


def cmd_throttle(a: argparse.Namespace) -> None:
    run_dir = Path(a.run_dir).resolve()
    if not pid_alive(read_pid(run_dir)):
        die("the guest is not running")
    limits = {} if a.off else {k: getattr(a, k) for k in THROTTLE_LIMITS if getattr(a, k)}
    if not a.off and not limits:
        die("give at least one limit (--bps-rd N, --iops-rd N, ...) or --off")
    replies = qmp(run_dir, "query-block")
    if len(replies) != 2:
        die(f"QMP closed early: {replies}")
    qdev = drive_qdev(qmp_return(replies[-1], "query-block") or [], a.serial)
    replies = qmp(run_dir, ("block_set_io_throttle", throttle_arguments(qdev, limits)), "query-block")
    if len(replies) != 3:
        die(f"QMP closed early: {replies}")
    qmp_return(replies[-2], "block_set_io_throttle")
    # what QEMU has in effect now, read back
    block = next(b for b in qmp_return(replies[-1], "query-block") if b.get("device") == f"drv-{a.serial}")
    in_effect = {k: block.get("inserted", {}).get(k) for k in THROTTLE_LIMITS}
    log(f"drv-{a.serial} ({qdev}): " + (", ".join(f"{k}={v}" for k, v in in_effect.items() if v) or "unthrottled"))
    print(json.dumps({"serial": a.serial, "drive": f"drv-{a.serial}", "qdev": qdev, "limits": in_effect}))


def _limit(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"a limit is >= 0, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="action", required=True)
    s = sub.add_parser("start")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--image-dir", help="cache entry from build-image.sh (default: build or reuse)")
    s.add_argument("--port", type=int, default=0, help="host port for SSH (default: a free one)")
    s.add_argument("--wait", type=float, default=0, help="wait up to S seconds for SSH")
    s.add_argument("--accel", choices=["tcg", "kvm", "auto"], default=os.environ.get("GDS_VM_ACCEL", "tcg"))
    s.add_argument("--smp", type=int, default=int(os.environ.get("GDS_VM_SMP", "2")))
    s.add_argument("--mem", type=int, default=int(os.environ.get("GDS_VM_MEM", "2048")), help="MiB")
    s.add_argument("--kernel", help="kernel to boot (default: the cached image's)")
    s.add_argument("--initrd", help="initrd to boot (default: the cached image's)")
    s.add_argument("--append", help=f"kernel command line (default: {DEFAULT_APPEND})")
    s.add_argument("--cpu", help="QEMU CPU model under TCG (default: GDS_VM_CPU, else max)")
    s.add_argument("--acs-pair", action="store_true", help="add the P2PDMA bench's ACS pair (ACS_PAIR)")
    s.set_defaults(func=cmd_start)
    s = sub.add_parser("reboot", help="clean shutdown, then boot what the guest's grub.cfg names")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--timeout", type=int, default=90, help="seconds for the clean shutdown")
    s.add_argument("--wait", type=float, default=420, help="wait up to S seconds for SSH")
    s.add_argument("--smp", type=int, default=int(os.environ.get("GDS_VM_SMP", "2")))
    s.add_argument("--mem", type=int, default=int(os.environ.get("GDS_VM_MEM", "2048")), help="MiB")
    s.set_defaults(func=cmd_reboot)
    s = sub.add_parser("stop")
    s.add_argument("--run-dir", required=True)
    s.add_argument("--timeout", type=int, default=60)
    s.set_defaults(func=cmd_stop)
    s = sub.add_parser("status")
    s.add_argument("--run-dir", required=True)
    s.set_defaults(func=cmd_status)
    s = sub.add_parser("ssh")
    s.add_argument("--run-dir", required=True)
    s.add_argument("cmd", nargs=argparse.REMAINDER)
    s.set_defaults(func=cmd_ssh)
    s = sub.add_parser("throttle", help="QEMU I/O throttling of one NVMe drive, to make it slow")
    s.add_argument("--run-dir", required=True)
    s.add_argument("serial", help="the drive's serial, e.g. gds-sw1-b")
    for key in THROTTLE_LIMITS:
        s.add_argument("--" + key.replace("_", "-"), dest=key, type=_limit, default=0,
                       help=("bytes" if key.startswith("bps") else "requests") + " per second; 0: unlimited")
    s.add_argument("--off", action="store_true", help="remove every limit of the drive")
    s.set_defaults(func=cmd_throttle)
    s = sub.add_parser("topology")
    s.set_defaults(func=lambda a: print(json.dumps(topology(), indent=1)))
    return ap


def main(argv: list[str] | None = None) -> None:
    ap = build_parser()
    a = ap.parse_args(argv)
    if getattr(a, "off", False) and any(getattr(a, k) for k in THROTTLE_LIMITS):
        ap.error("--off takes no limits")
    if getattr(a, "cmd", None) and a.cmd[:1] == ["--"]:
        a.cmd = a.cmd[1:]
    a.func(a)


if __name__ == "__main__":
    main()
