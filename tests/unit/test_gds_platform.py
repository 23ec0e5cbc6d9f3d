"""gds_platform: kernel, IOMMU, NVIDIA driver (open or not), nvidia-fs, peermem, P2PDMA, udev data
for the data drives, vfio, lockdown, DGX packages, and GPU facts from a fake pynvml."""
import copy
import gzip
import os
import textwrap

import pytest
import simtree

from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import NvmlUnavailable
from ansible_collections.gds.commission.plugins.module_utils.tune.driver import driver_checks
from ansible_collections.gds.commission.plugins.module_utils.hw.platform import (
    collect, cpu_info, dpkg_packages, iommu_state, parse_cmdline, parse_nvfs_stats,
    parse_nvidia_version, registry_dwords, requested_iommu_mode, shipped_modules, version_tuple,
)


def fixture(name, files=None, drop=(), **changes):
    data = copy.deepcopy(simtree.load_fixture(name))
    data.update(changes)
    merged = dict(data.get("files") or {})
    for key in drop:
        merged = {k: v for k, v in merged.items() if not k.startswith(key)}
    merged.update(files or {})
    data["files"] = merged
    return data


def facts_of(root, **kwargs):
    facts, warnings = collect(os.path.join(root, "sys"), os.path.join(root, "proc"), root, **kwargs)
    return facts


def args_for(node, **extra):
    args = {"sysfs_root": os.path.join(node, "sys"), "procfs_root": os.path.join(node, "proc"), "root": node}
    args.update(extra)
    return args


# --------------------------------------------------------------------------------------------
# Parsers
# --------------------------------------------------------------------------------------------
def test_cmdline_parsing():
    args, params = parse_cmdline('BOOT_IMAGE=/vmlinuz ro quiet iommu=pt "pci=config_acs=000000@0000:04:10.0;0000000@0000:04:14.0" iommu=nopt\n')
    assert args[-2] == "pci=config_acs=000000@0000:04:10.0;0000000@0000:04:14.0"
    assert params["ro"] is True and params["iommu"] == "nopt"  # last one wins
    assert parse_cmdline(None) == ([], {})


@pytest.mark.parametrize("cmdline,mode", [
    ("ro quiet", None),
    ("intel_iommu=on", "on"),
    ("intel_iommu=on iommu=pt", "pt"),
    ("intel_iommu=on,sm_on", "on"),
    ("intel_iommu=off iommu=pt", "off"),
    ("amd_iommu=off", "off"),
    ("iommu=pt", "pt"),
    ("iommu.passthrough=1", "pt"),
    ("iommu.passthrough=0", "on"),
    ("intel_iommu=on iommu=nopt", "on"),
    ("iommu=off", "off"),
])
def test_requested_iommu_mode(cmdline, mode):
    assert requested_iommu_mode(parse_cmdline(cmdline)[1]) == mode


def test_running_iommu_mode_from_groups(tmp_path):
    sysfs = tmp_path / "sys"
    assert iommu_state(str(sysfs), {})["mode"] == "off"
    (sysfs / "class" / "iommu" / "dmar0").mkdir(parents=True)
    assert iommu_state(str(sysfs), {})["mode"] == "on"  # units, no group types: translating
    assert iommu_state(str(sysfs), {"iommu": "pt"})["mode"] == "pt"
    for group, kind in ((0, "identity"), (1, "identity")):
        (sysfs / "kernel" / "iommu_groups" / str(group)).mkdir(parents=True)
        (sysfs / "kernel" / "iommu_groups" / str(group) / "type").write_text(kind + "\n")
    state = iommu_state(str(sysfs), {"intel_iommu": "on"})
    assert state["mode"] == "pt" and state["groups"] == 2 and state["requested"] == "on"
    (sysfs / "kernel" / "iommu_groups" / "2").mkdir()
    (sysfs / "kernel" / "iommu_groups" / "2" / "type").write_text("DMA-FQ\n")
    assert iommu_state(str(sysfs), {})["mode"] == "on"


def test_nvidia_version_open_or_proprietary():
    open_km = parse_nvidia_version(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16)  Tue Mar  5 2024\n")
    assert open_km["version"] == "550.54.15" and open_km["open"] is True
    prop = parse_nvidia_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n")
    assert prop["version"] == "535.104.05" and prop["open"] is False
    arm = parse_nvidia_version("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  560.35.03  Release Build\n")
    assert arm["open"] is True and arm["version"] == "560.35.03"
    assert parse_nvidia_version(None) == {"version": None, "open": None, "banner": None}


def test_registry_dwords_and_nvfs_stats():
    assert registry_dwords("RMForceStaticBar1=1;RmForceDisableIomapWC=1;") == {
        "RMForceStaticBar1": "1", "RmForceDisableIomapWC": "1"}
    stats = parse_nvfs_stats(textwrap.dedent("""\
        GDS Version: 1.9.1.3 
        NVFS statistics(ver: 4.0)
        NVFS Driver(version: 2.19.6)
        Mellanox PeerDirect Supported: True
        IO stats: Enabled, peer IO stats: Disabled
        Logging level: warn

        Active Shadow-Buffer (MiB): 0
        Reads				: n=1024 ok=1024 err=0 readMiB=1024 io_state_err=0
        Writes				: n=7 ok=7 err=0 writeMiB=7 io_state_err=0 pg-cache=0 pg-cache-fail=0 pg-cache-eio=0
        """))
    assert stats == {"gds_version": "1.9.1.3", "driver_version": "2.19.6", "io_stats": True,
                     "peer_io_stats": False, "reads": 1024, "writes": 7}


def test_versions_packages_and_modules(tmp_path):
    assert version_tuple("6.8.0-60-generic") == (6, 8, 0) and version_tuple("6.2") == (6, 2, 0)
    assert version_tuple("weird") is None
    status = tmp_path / "var" / "lib" / "dpkg"
    status.mkdir(parents=True)
    (status / "status").write_text(textwrap.dedent("""\
        Package: nvidia-acs-disable
        Status: install ok installed
        Version: 23.04-1
        Description: disable ACS
         on DGX systems

        Package: nvidia-fs-dkms
        Status: deinstall ok config-files
        Version: 2.17.3-1

        Package: bash
        Status: install ok installed
        Version: 5.2
        """))
    assert dpkg_packages(str(tmp_path)) == {"nvidia-acs-disable": "23.04-1"}
    assert dpkg_packages(str(tmp_path / "nowhere")) is None
    mods = tmp_path / "lib" / "modules" / "5.15.0-1"
    mods.mkdir(parents=True)
    (mods / "modules.dep").write_text("kernel/x/nv_peer_mem.ko: kernel/y/ib_core.ko.zst\nkernel/y/ib_core.ko.zst:\n")
    (mods / "modules.builtin").write_text("kernel/drivers/nvme/host/nvme-core.ko\n")
    assert shipped_modules(str(tmp_path), "5.15.0-1") == ["ib_core", "nv_peer_mem", "nvme_core"]
    assert shipped_modules(str(tmp_path), "6.0") is None


def test_grace_cpu_is_recognised(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cpuinfo").write_text("processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\n"
                                  "CPU architecture: 8\nCPU part\t: 0xd4f\n\nprocessor\t: 1\n")
    assert cpu_info(str(proc)) == {"vendor": "ARM", "family": None, "model": None, "arch": "aarch64", "grace": True}


# --------------------------------------------------------------------------------------------
# Whole facts on the demo nodes and variants
# --------------------------------------------------------------------------------------------
def test_demo_a100_facts(sim_node):
    facts = facts_of(sim_node("dgx-a100"), block_devices=["nvme0n1"])  # md1 joins: built on nvme0n1
    assert facts["kernel"]["release"] == "5.4.0-52-generic" and facts["arch"] == "x86_64"
    assert facts["iommu"]["mode"] == "off" and facts["iommu"]["units"] == []
    assert facts["nvidia_driver"]["open"] is False and facts["nvidia_driver"]["version"] == "535.183.06"
    assert facts["nvidia_fs"] == {"loaded": True, "version": "2.17.5", "proc_version": True,
                                  "rw_stats_enabled": False, "stats": facts["nvidia_fs"]["stats"]}
    assert facts["modules"]["peermem"] == "nvidia_peermem"
    assert facts["p2pdma"]["supported"] is False and facts["p2pdma"]["kernel"] is False
    assert facts["udev"]["readable"] and facts["udev"]["missing"] == []
    assert [d["dev"] for d in facts["udev"]["devices"]] == ["259:0", "9:1"]
    assert [a["name"] for a in facts["md_arrays"]] == ["md0", "md1"]
    assert "nvme9n1" in facts["md_arrays"][1]["members"]
    assert facts["lockdown"] == "none" and facts["vfio_devices"] == []
    assert facts["dgx_release"]["DGX_PLATFORM"] == "DGX Server for DGX A100"
    assert facts["acs_cmdline"] == {"config_acs": False, "device_lists": True, "disable_acs_redir": True}


def test_demo_h100_facts(sim_node):
    facts = facts_of(sim_node("hgx-h100"), block_devices=["nvme3n1"])
    assert facts["iommu"]["mode"] == "pt" and facts["iommu"]["requested"] == "pt"
    assert facts["iommu"]["units"] == ["dmar0", "dmar1", "dmar2", "dmar3"]
    assert facts["nvidia_driver"]["open"] is True
    assert facts["p2pdma"] == {"kernel": True, "pgmap_ops": None, "config": True, "built_in": True,
                               "kernel_supported": True, "open_driver": True, "supported": True}
    assert facts["nvme_multipath"] == "Y"
    assert facts["udev"]["devices"] == [{"name": "nvme3n1", "dev": "259:12", "present": True,
                                         "path": facts["udev"]["devices"][0]["path"]}]


def test_udev_missing_entirely_or_per_drive(sim_node):
    root = sim_node(fixture("hgx-h100", drop=("run/udev/data/b259:4",)), name="one")
    udev = facts_of(root, block_devices=["nvme0n1", "nvme1n1"])["udev"]
    assert udev["readable"] and udev["missing"] == ["nvme1n1"]
    root = sim_node(fixture("hgx-h100", drop=("run/",)), name="none")
    udev = facts_of(root, block_devices=["nvme0n1", "nosuchdisk"])["udev"]
    assert udev["readable"] is False and udev["missing"] == ["nvme0n1", "nosuchdisk"]
    assert udev["devices"][1]["dev"] is None


def test_p2pdma_on_an_older_kernel_with_the_backport(sim_node):
    data = fixture("hgx-h100", files={
        "proc/sys/kernel/osrelease": "5.14.0-427.el9.x86_64\n",
        "proc/kallsyms": "ffffffff81000000 T _stext\nffffffff82a1b2c0 d p2pdma_pgmap_ops\n"})
    facts = facts_of(sim_node(data))
    assert facts["p2pdma"]["kernel"] is False and facts["p2pdma"]["pgmap_ops"] is True
    assert facts["p2pdma"]["supported"] is True
    assert facts["modules"]["shipped"] is None  # no modules.dep for that release in the tree


@pytest.mark.parametrize("where", ["boot", "config.gz", "kallsyms"])
def test_a_new_kernel_built_without_p2pdma_does_not_support_it(sim_node, where):
    """Debian's 6.12 (bookworm-backports, trixie) is new enough and built without CONFIG_PCI_P2PDMA:
    the running kernel's config (or its symbols) says so, not its version."""
    release = "6.12.95+deb12-amd64"
    files = {"proc/sys/kernel/osrelease": release + "\n"}
    drop = ("boot/",)
    if where == "boot":
        files["boot/config-" + release] = "CONFIG_PCI=y\n# CONFIG_PCI_P2PDMA is not set\n"
    elif where == "config.gz":
        files["proc/config.gz"] = gzip.compress(b"CONFIG_PCI=y\n# CONFIG_PCI_P2PDMA is not set\n")
    else:
        files["proc/kallsyms"] = "ffffffff81000000 T _stext\nffffffff82a1b2c0 T pci_p2pdma_distance_many\n"
    facts = facts_of(sim_node(fixture("hgx-h100", drop=drop, files=files)))
    assert facts["p2pdma"]["kernel"] is True and facts["p2pdma"]["built_in"] is False
    assert facts["p2pdma"]["kernel_supported"] is False and facts["p2pdma"]["supported"] is False
    [support] = [c for c in driver_checks(facts, "p2pdma", gpus=8) if c["name"] == "driver: P2PDMA support"]
    assert support["verdict"] == "FAIL" and "built without CONFIG_PCI_P2PDMA" in support["actual"]


def test_nv_peer_mem_when_only_mlnx_ofed_ships_it(sim_node):
    data = fixture("dgx-a100", drop=("sys/module/nvidia_peermem",), files={
        "lib/modules/5.4.0-52-generic/modules.dep": "updates/dkms/nvidia.ko:\nextra/nv_peer_mem.ko:\n"})
    assert facts_of(sim_node(data))["modules"]["peermem"] == "nv_peer_mem"
    data = fixture("dgx-a100", drop=("sys/module/nvidia_peermem", "lib/modules"))
    assert facts_of(sim_node(data, name="nothing"))["modules"]["peermem"] is None


def test_vfio_lockdown_and_dgx_package(sim_node):
    data = fixture("dgx-a100", files={
        "sys/kernel/security/lockdown": "none integrity [confidentiality]\n",
        "var/lib/dpkg/status": "Package: nvidia-acs-disable\nStatus: install ok installed\nVersion: 1.0\n"})
    data["nics"] = [dict(n, driver="vfio-pci") if n["rdma"] == "mlx5_7" else n for n in data["nics"]]
    facts = facts_of(sim_node(data))
    assert facts["vfio_devices"] == ["0000:cb:00.0"] and facts["lockdown"] == "confidentiality"
    assert facts["packages"] == {"nvidia-acs-disable": "1.0"}


# --------------------------------------------------------------------------------------------
# GPUs from NVML (a fake pynvml with what NVML reports on an HGX H100)
# --------------------------------------------------------------------------------------------
class FakeNvml(object):
    """pynvml's functions for 8 H100s at the hgx-h100 fixture's bus ids (NVML's order differs from
    PCI order on purpose), or a failing nvmlInit."""

    class _Obj(object):
        def __init__(self, **kw):
            self.__dict__.update(kw)

    def __init__(self, bus_ids, fail=None):
        self.bus_ids = bus_ids
        self.fail = fail
        self.shutdown = False

    def nvmlInit(self):
        if self.fail:
            raise RuntimeError(self.fail)

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlSystemGetDriverVersion(self):
        return b"550.54.15"

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return 12040

    def nvmlDeviceGetCount(self):
        return len(self.bus_ids)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetPciInfo(self, handle):
        return self._Obj(busId=("0000" + self.bus_ids[handle]).encode())

    def nvmlDeviceGetName(self, handle):
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-%08x-0000-0000-0000-000000000000" % handle

    def nvmlDeviceGetMemoryInfo(self, handle):
        return self._Obj(total=85520809984)

    def nvmlDeviceGetBAR1MemoryInfo(self, handle):
        return self._Obj(bar1Total=137438953472)


H100_BUS_IDS = ["0000:18:00.0", "0000:1d:00.0", "0000:3a:00.0", "0000:3f:00.0",
                "0000:9d:00.0", "0000:a2:00.0", "0000:bb:00.0", "0000:c0:00.0"]


def test_gpu_facts_from_nvml(sim_node):
    fake = FakeNvml(H100_BUS_IDS)
    facts = facts_of(sim_node("hgx-h100"), gpu_source="nvml", pynvml=fake)
    assert fake.shutdown
    assert len(facts["gpus"]) == 8 and facts["nvml"] == {"used": True, "reason": None}
    gpu = facts["gpus"][2]
    assert gpu == {"index": 2, "bdf": "0000:3a:00.0", "name": "NVIDIA H100 80GB HBM3",
                   "uuid": "GPU-00000002-0000-0000-0000-000000000000", "memory_total_bytes": 85520809984,
                   "bar1_total_bytes": 137438953472, "driver_version": "550.54.15",
                   "cuda_driver_version": "12.4", "open_kernel_module": True, "nvlinks": {}}


def test_nvml_failure_is_a_fact_in_auto_and_an_error_with_nvml(sim_node):
    root = sim_node("hgx-h100")
    facts = facts_of(root, gpu_source="auto", pynvml=FakeNvml([], fail="NVML Shared Library Not Found"))
    assert facts["gpus"] == [] and facts["nvml"]["used"] is False
    assert "NVML Shared Library Not Found" in facts["nvml"]["reason"]
    with pytest.raises(NvmlUnavailable):
        facts_of(root, gpu_source="nvml", pynvml=FakeNvml([], fail="Driver Not Loaded"))


FAKE_PYNVML_MODULE = '''
"""A stand-in for pynvml (nvidia-ml-py) that answers like two A100s, or fails like a node without a driver."""
import os
class NVMLError(Exception):
    pass
class _O(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)
BUS = ["00000000:07:00.0", "00000000:0F:00.0"]
def nvmlInit():
    if os.environ.get("FAKE_NVML_FAIL"):
        raise NVMLError(os.environ["FAKE_NVML_FAIL"])
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "535.183.06"
def nvmlSystemGetCudaDriverVersion_v2(): return 12020
def nvmlDeviceGetCount(): return len(BUS)
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetPciInfo(h): return _O(busId=BUS[h])
def nvmlDeviceGetName(h): return "NVIDIA A100-SXM4-40GB"
def nvmlDeviceGetUUID(h): return "GPU-%d" % h
def nvmlDeviceGetMemoryInfo(h): return _O(total=42949672960)
def nvmlDeviceGetBAR1MemoryInfo(h): raise NVMLError("Not Supported")
'''


@pytest.fixture
def fake_pynvml(tmp_path, monkeypatch):
    path = tmp_path / "fake_pynvml"
    path.mkdir()
    (path / "pynvml.py").write_text(FAKE_PYNVML_MODULE)
    monkeypatch.syspath_prepend(str(path))  # run_module passes sys.path on as PYTHONPATH
    return path


def test_module_with_fake_pynvml(sim_node, module_runner, fake_pynvml, monkeypatch):
    root = sim_node("dgx-a100")
    rc, result = module_runner("gds_platform", args_for(root, gpu_source="nvml"))
    assert rc == 0, result
    facts = result["ansible_facts"]["gds_platform"]
    assert [g["bdf"] for g in facts["gpus"]] == ["0000:07:00.0", "0000:0f:00.0"]
    assert facts["gpus"][0]["bar1_total_bytes"] is None and facts["gpus"][0]["open_kernel_module"] is False
    # default block devices: the data drives of the topology and the array built on them
    assert [d["name"] for d in facts["udev"]["devices"]] == [
        "nvme0n1", "nvme1n1", "nvme4n1", "nvme5n1", "nvme6n1", "nvme7n1", "nvme8n1", "nvme9n1", "md1"]
    rc, result = module_runner("gds_platform", args_for(root))  # auto on a fixture tree: no NVML
    assert rc == 0 and result["ansible_facts"]["gds_platform"]["gpus"] == []
    monkeypatch.setenv("FAKE_NVML_FAIL", "Driver/library version mismatch")
    rc, result = module_runner("gds_platform", args_for(root, gpu_source="nvml"))
    assert rc != 0 and "NVML is unusable" in result["msg"] and "version mismatch" in result["msg"]


def test_module_check_mode_and_bad_roots(sim_node, module_runner):
    root = sim_node("hgx-h100")
    rc, result = module_runner("gds_platform", args_for(root), check_mode=True)
    assert rc == 0 and result["changed"] is False
    assert result["ansible_facts"]["gds_platform"]["iommu"]["mode"] == "pt"
    rc, result = module_runner("gds_platform", args_for(root, root=os.path.join(root, "nope")))
    assert rc != 0 and result["msg"].startswith("root: ") and "nope" in result["msg"]
    rc, result = module_runner("gds_platform", args_for(root, gpu_source="maybe"))
    assert rc != 0 and "gpu_source" in result["msg"]


def test_malformed_mdstat_is_a_warning_not_a_traceback(sim_node, module_runner):
    data = fixture("dgx-a100")
    data["proc"] = dict(data["proc"], mdstat="Personalities : [raid0]\nmd9 : active raid0 ???\n")
    root = sim_node(data)
    rc, result = module_runner("gds_platform", args_for(root, block_devices=["nvme0n1"]))
    assert rc == 0, result
    assert any("mdstat" in w for w in result.get("warnings", []))


def test_block_devices_from_the_caller_or_the_topology(sim_node, module_runner):
    root = sim_node("dgx-a100")
    rc, result = module_runner("gds_platform", args_for(root))  # left out: the topology's data drives
    assert rc == 0 and result["ansible_facts"]["gds_platform"]["udev"]["devices"]
    rc, result = module_runner("gds_platform", args_for(root, block_devices=[]))  # the facts said: none
    assert rc == 0 and result["ansible_facts"]["gds_platform"]["udev"]["devices"] == []
