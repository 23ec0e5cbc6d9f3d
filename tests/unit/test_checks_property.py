"""Unknown is never PASS: every check builder of the collection, fed unknowns where it reads a
measured figure or fact (None, NaN, infinity, a negative number, "unknown", a missing member),
raises nothing and judges no PASS from them (core/checks.check enforces it, docs/architecture.md).

The builders are found, not listed: every function or method of the collection's plugins named
``*_check``/``*_checks`` or calling core/checks.check itself. Each one needs a CASE below (a good
input that PASSes, and the paths in it that hold what it judges), or an entry in DELEGATES (it
only hands on the checks of builders that have a case, or builds none that can PASS: its source
never says "PASS") or NOT_BUILDERS (it builds no check): a new builder without one fails
test_every_builder_has_a_case.
"""
import copy
import importlib
import inspect
import math
import os
import re

import pytest

from ansible_collections.gds.commission.plugins.module_utils.core import checks as core_checks
from ansible_collections.gds.commission.plugins.module_utils.core.checks import check, refuse_unknown, unknown_why
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import topology_checks, visibility_checks
from ansible_collections.gds.commission.plugins.module_utils.tune import acs as tune_acs
from ansible_collections.gds.commission.plugins.module_utils.tune.acs import acs_checks
from ansible_collections.gds.commission.plugins.module_utils.tune.driver import (
    driver_checks, p2pdma_pairs_check, udev_check, udev_record_check,
)
from ansible_collections.gds.commission.plugins.module_utils.tune.iommu import iommu_checks
from ansible_collections.gds.commission.plugins.module_utils.hw.health import aer_checks, link_checks
from ansible_collections.gds.commission.plugins.module_utils.measure import concurrency, p2p_probe, perftest, thresholds
from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import (
    gpu_health_check, health_thresholds, nvme_health_check,
)
from ansible_collections.gds.commission.plugins.module_utils.measure.diskload import drive_load_check, drives_served_check
from ansible_collections.gds.commission.plugins.module_utils.measure import pcie_traffic
from ansible_collections.gds.commission.plugins.module_utils.measure.pcie_traffic import bounce_check
from ansible_collections.gds.commission.plugins.module_utils.measure.watch import DEFAULT_THRESHOLDS, JobWatch
from ansible_collections.gds.commission.plugins.module_utils.fleet import report
from ansible_collections.gds.commission.plugins.module_utils.tune.cufile import remote_fs_check, report_checks
from ansible_collections.gds.commission.plugins.module_utils.tune.mounts import NetfsError, mount_checks
from ansible_collections.gds.commission.plugins.module_utils.tune.raid import raid_checks
from ansible_collections.gds.commission.plugins.module_utils.tune.rdma import (
    pairing_checks, peermem_check, port_checks,
)
from ansible_collections.gds.commission.plugins.modules import gds_bench
from conftest import COLLECTION

MISSING = "<missing member>"
HOSTILE = [None, float("nan"), float("inf"), float("-inf"), -1, -0.5, "unknown", "NaN", MISSING]


# --------------------------------------------------------------------------------------------
# The rule itself
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", HOSTILE[:-1] + [10 ** 400, [1, None], {"a": float("nan")}])
def test_unknown_why_names_every_unknown(value):
    assert unknown_why(value)


@pytest.mark.parametrize("value", [0, 3, 2.5, True, False, "", "x16 16.0 GT/s", [1, 2], {"a": 0}, ()])
def test_unknown_why_accepts_known_values(value):
    assert unknown_why(value) is None


def test_pass_with_an_unknown_is_skip_or_warn_with_the_reason():
    assert check("x: a", "PASS", 1, 1)["verdict"] == "PASS"
    nothing = check("x: a", "PASS", 1, None, "detail")
    assert nothing["verdict"] == "SKIP" and nothing["detail"].startswith("detail; not PASS, unknown: actual missing")
    part = check("x: a", "PASS", 1, "text", inputs={"rate": float("nan"), "width": 16})
    assert part["verdict"] == "WARN" and "rate nan is not a finite number" in part["detail"]
    assert "inputs" not in part
    assert check("x: a", "PASS", 1, "text", inputs={"a": -1, "b": "unknown"})["verdict"] == "WARN"
    # the rule never turns a FAIL or an ERROR into something milder
    for verdict in ("FAIL", "ERROR", "WARN", "SKIP"):
        assert check("x: a", verdict, 1, None, inputs={"a": None})["verdict"] == verdict
    assert refuse_unknown("PASS", 1, {"a": 0}) == ("PASS", None)
    with pytest.raises(ValueError):
        check("x: a", "PASS", 1, 1, inputs=[1])


def test_one_home_for_usable_figures():
    """core/numbers.py decides what a usable figure is; the checks, the thresholds, the report and
    the health readers use that one decision."""
    from ansible_collections.gds.commission.plugins.module_utils.core import numbers
    from ansible_collections.gds.commission.plugins.module_utils.hw import health
    from ansible_collections.gds.commission.plugins.module_utils.measure import diskload, devhealth, watch
    from ansible_collections.gds.commission.plugins.module_utils.fleet import (
        report_baselines, report_html, report_links, report_text, report_tree,
    )
    assert core_checks.is_figure is numbers.is_figure
    for module in (report_baselines, report_html, report_links, report_text, report_tree):  # the report's parts
        assert module.is_figure is numbers.is_figure, module.__name__
    for module in (thresholds, report_baselines, health, diskload, devhealth, watch, pcie_traffic):
        assert module.figure is numbers.figure, module.__name__
    assert perftest.known_figure is numbers.figure
    for value in (None, True, "3", [1], float("nan"), float("inf"), 10 ** 400):
        assert not numbers.is_figure(value) and numbers.figure(value) is None, value
        with pytest.raises(numbers.BadNumber):
            numbers.finite(value, None)
    assert numbers.figure(-1) is None and numbers.is_figure(-1) and numbers.figure(2.5) == 2.5
    assert numbers.whole_figure(3.0) == 3 and numbers.whole_figure(2.5) is None and numbers.whole_figure(-1) is None


# --------------------------------------------------------------------------------------------
# Finding the builders
# --------------------------------------------------------------------------------------------
PLUGINS = os.path.join(COLLECTION, "plugins")
BUILDER_NAME = re.compile(r"^.+_checks?$")


def _modules():
    for sub in ("module_utils", "modules", "filter"):
        for dirpath, dummy, files in sorted(os.walk(os.path.join(PLUGINS, sub))):
            for name in sorted(files):
                if name.endswith(".py") and name != "__init__.py":
                    rel = os.path.relpath(os.path.join(dirpath, name), os.path.dirname(os.path.dirname(os.path.dirname(COLLECTION))))
                    yield importlib.import_module(rel[:-3].replace(os.sep, "."))


def _functions(module):
    for name, obj in sorted(vars(module).items()):
        if inspect.isfunction(obj) and obj.__module__ == module.__name__:
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__ == module.__name__:
            for attr, member in sorted(vars(obj).items()):
                if inspect.isfunction(member):
                    yield "%s.%s" % (name, attr), member


def _calls_check(function):
    """Whether ``function`` calls core/checks.check itself, under whatever name it imported it."""
    names = [n for n, v in function.__globals__.items() if v is check]
    body = inspect.getsource(function).split("\n", 1)[1]
    return any(re.search(r"(?<![\w.])%s\(" % re.escape(n), body) for n in names)


def discover():
    """{"<module>:<qualified name>": function} of every check builder in the plugins."""
    found = {}
    for module in _modules():
        for name, function in _functions(module):
            if function is check:
                continue
            if BUILDER_NAME.match(name.rsplit(".", 1)[-1]) or _calls_check(function):
                found["%s:%s" % (module.__name__.rsplit(".", 1)[-1], name)] = function
    return found


BUILDERS = discover()

# builders that only hand on checks built by builders with a case, or build none that can PASS
DELEGATES = {
    "gds_checks:gds_topology_checks": "hw/affinity.topology_checks as a filter",
    "gds_checks:gds_acs_checks": "tune/acs.acs_checks as a filter",
    "gds_checks:gds_iommu_checks": "tune/iommu.iommu_checks as a filter",
    "gds_checks:gds_driver_checks": "tune/driver.driver_checks as a filter",
    "rdma:rdma_checks": "pairing_checks, port_checks, peermem_check",
    "thresholds:skipped_job_checks": "SKIP only",
    "thresholds:jobs_run_check": "FAIL only",
    "thresholds:gpu_skip_check": "SKIP only",
    "mounts:_gpu_map_check": "WARN only",
    "module:utf8_result": "the WARN check of bytes that are not UTF-8",
    "gds_bench:udev_check": "the device of a file from os.stat, judged by tune/driver.udev_record_check",
    "gds_bench:compare_jobs": "compare_check per job; its own checks are SKIP",
    "gds_bench:run_checks": "the jobs', the health run's, jobs_run_check, gpu_skip_check and every_gpu_check",
    "gds_bench:main": "the ERROR check of a run that could not start",
    "report:host_document": "the report's FAIL, UNREACHABLE and ERROR checks of a host",
    "report:_with_error": "the ERROR check of a host input the report cannot render",
    "watch:JobWatch._broken_part": "the SKIP check of a part of the watch that raised",
    "checks:fold_skips": "one SKIP for a family of SKIPs",
    "diskload:_drive_records": "the SKIP check of a load record without drives",
    "gds_p2pdma_probe:main": "the SKIP check of check mode",
    "p2p_probe:probe": "answer_check per answer; its own checks are SKIP and ERROR",
}
# named like a builder, builds no check
NOT_BUILDERS = {
    "slurm:first_failing_check": "picks the check that failed a host",
    "report_links:_link_checks": "selects the link checks by bdf",
    "report_html:_rdma_checks": "selects the rdma: checks by name",
    "report_inputs:recorded_checks": "picks the checks a check variable holds (test_report.py)",
}


def test_every_builder_has_a_case():
    listed = set(CASES) | set(DELEGATES) | set(NOT_BUILDERS)
    assert not set(BUILDERS) - listed, "check builders without a hostile-input case here: %s" % sorted(set(BUILDERS) - listed)
    assert not listed - set(BUILDERS), "cases for functions that are no builders (renamed?): %s" % sorted(listed - set(BUILDERS))
    assert len(BUILDERS) > 30  # the discovery found the builders at all


@pytest.mark.parametrize("name", sorted(DELEGATES))
def test_delegates_build_no_pass_themselves(name):
    # reading a verdict (== "PASS") is no judging
    source = re.sub(r"""[!=]=\s*["']PASS["']""", "", inspect.getsource(BUILDERS[name]))
    assert '"PASS"' not in source and "'PASS'" not in source, \
        "%s judges PASS itself: give it a CASE instead of a DELEGATES entry" % name


# --------------------------------------------------------------------------------------------
# Cases: a good input, and where in it the judged figures are
# --------------------------------------------------------------------------------------------
class Case(object):
    """``make()`` returns (callable, args list, kwargs dict), a fresh good input each time.
    ``paths``: (path, pattern[, why a missing member is no unknown there]): the path into the
    arguments (an argument's index or keyword, then keys and list indices) of a judged value; no
    check whose name matches ``pattern`` may PASS once that value is unknown (None: only nothing
    may raise). ``raises``: the builder's own error for bad input, which must name the key at
    fault instead of judging. No case is marked xfail: every builder keeps the rule."""

    def __init__(self, make, paths, raises=()):
        self.make, self.paths, self.raises = make, paths, raises


def _topology():
    return {"gpus": [{"index": 0, "bdf": "0000:07:00.0", "nics": ["mlx5_0"], "nic_link": "PIX"},
                     {"index": 1, "bdf": "0000:0f:00.0", "nics": ["mlx5_0"], "nic_link": "PXB"}],
            "nvme": [{"name": "nvme0n1", "bdf": "0000:08:00.0"}, {"name": "nvme1n1", "bdf": "0000:09:00.0", "system": True}],
            "nics": [{"name": "mlx5_0", "bdf": "0000:0c:00.0", "netdev": "ib0", "netdevs": ["ib0"],
                      "ports": [{"port": 1, "state": "ACTIVE", "phys_state": "LinkUp", "rate_gbps": 200.0,
                                 "link_layer": "InfiniBand", "netdev": "ib0"}]}],
            "matrix": {"GPU0": {"mlx5_0": "PIX", "nvme0n1": "PIX"}, "GPU1": {"mlx5_0": "PXB", "nvme0n1": "PXB"}},
            "groups": [{"id": 0, "gpus": [0, 1], "nvme": ["nvme0n1"], "nics": ["mlx5_0"]}]}


def _p2p_topology():
    """_topology with the kernel's decision for its group's GPU-drive pairs (hw/p2pdma.py)."""
    topology = _topology()
    topology["p2pdma"] = {"whitelist": "Linux 7.3.4", "cpu_allows": False, "providers": ["0000:07:00.0", "0000:0f:00.0"],
                          "pairs": [{"provider": gpu, "client": "0000:08:00.0", "map": "bus_address", "distance": 4,
                                     "common": "0000:06:00.0", "acs_redirect": [],
                                     "reason": "common upstream bridge"} for gpu in ("0000:07:00.0", "0000:0f:00.0")]}
    return topology


def _platform():
    return {"arch": "x86_64", "kernel": {"release": "6.8.0"},
            "nvidia_driver": {"loaded": True, "version": "570.86.15", "open": True, "banner": "NVRM version",
                              "registry": {"RMForceStaticBar1": "1", "RmForceDisableIomapWC": "1"},
                              "registry_dwords": "RMForceStaticBar1=1;RmForceDisableIomapWC=1"},
            "nvidia_fs": {"loaded": True, "version": "2.24.3", "proc_version": True, "rw_stats_enabled": True},
            "p2pdma": {"supported": True}, "nvme_multipath": "N",
            "udev": {"path": "/run/udev", "readable": True, "devices": [{"name": "nvme0n1", "dev": "259:0"}],
                     "missing": []}}


def _links():
    nvme = {"bdf": "0000:08:00.0", "kind": "nvme", "upstream": "0000:06:00.0", "current_width": 4,
            "expected_width": 4, "current_speed_gts": 16.0, "expected_speed_gts": 16.0,
            "max_width": 4, "max_speed_gts": 16.0}
    gpu = {"bdf": "0000:07:00.0", "kind": "gpu", "upstream": "0000:06:00.1", "current_width": 16,
           "expected_width": 16, "current_speed_gts": 2.5, "expected_speed_gts": 32.0,
           "max_width": 16, "max_speed_gts": 32.0}
    return [nvme, gpu], {"0000:07:00.0": {"max_gen_seen": 5, "max_gen": 5, "max_width_seen": 16,
                                          "max_width": 16, "samples": 20}}


def _aer():
    before = {"0000:08:00.0": {"correctable": 3, "nonfatal": 0, "fatal": 0}}
    after = {"0000:08:00.0": {"correctable": 4, "nonfatal": 0, "fatal": 0}}
    return before, after


def _mount():
    return {"mountpoint": "/mnt/nfs", "fstype": "nfs", "fs": "nfs", "source": "10.0.0.2:/e",
            "server": "10.0.0.2", "server_address": "10.0.0.2", "export": "/e",
            "options": {"rsize": "1048576", "wsize": "1048576", "proto": "rdma", "port": "20049"},
            "transport": "rdma", "rdma": True, "port": 20049, "vers": "3", "rsize": 1048576, "wsize": 1048576,
            "netdev": "ib0", "lower_netdevs": [], "nics": ["mlx5_0"], "nic": "mlx5_0", "route": {"dev": "ib0"},
            "gpus": [0, 1], "errors": []}


def _perftest_rows():
    settings = perftest.settings_from({"affinity_gain": [1.1, -0.1, None, "x"], "lat_us_max": 10.0})
    topology = _topology()
    topology["nics"][0]["numa_node"] = 0
    rows = perftest.plan(topology, dict(settings, tests=["ib_write_bw", "ib_write_lat"], memory=["host", "cuda"]))
    for row in rows:
        if row["test"] == "ib_write_bw":
            row["gbps"] = 195.0 if row["affine"] else 150.0
        else:
            row["lat_us"] = 2.0
        perftest.judge(row, settings)
    return rows, settings


def _nvme_smart():
    return {"source": "nvme-cli", "critical_warning": 0, "media_errors": 0, "percentage_used": 3,
            "temperature_c": 41.0, "problem": None}


def _gpu_facts():
    return {"ecc_uncorrected_volatile": 0, "ecc_uncorrected_aggregate": 0, "retired_pages_pending": False,
            "remapped_rows": {"failure": False, "pending": False, "uncorrectable": 0}, "unknown": []}


def _drive_load():
    drive = {"read_bytes": 4 << 30, "write_bytes": 0, "r_s": 9000.0, "w_s": 0.0, "r_await_ms": 0.2,
             "w_await_ms": 0.0, "util_pct": 90.0}
    return {"drives": [dict(drive, name="nvme0n1"), dict(drive, name="nvme2n1")], "seconds": 10.0,
            "source": "/proc/diskstats"}


def _gpu_traffic():
    return [{"index": 0, "bdf": "0000:07:00.0", "rx_bytes": 8 << 30, "tx_bytes": 1 << 20, "source": "NVML"},
            {"index": 1, "bdf": "0000:0f:00.0", "rx_bytes": 1 << 20, "tx_bytes": 1 << 20, "source": "NVML"}]


def _watch():
    watch = JobWatch.__new__(JobWatch)
    watch.th = dict(DEFAULT_THRESHOLDS, path_fraction_min=0.5)
    return watch


def _job():
    return {"name": "md1 seq_read", "thresholds": {"throughput_gib_s": [10.0, -0.1, None, "GiB/s"],
                                                   "fraction_of_spec": [0.85, -0.15, None, ""]},
            "xfer_type": 0, "expect_path": "nvfs", "spec": {"metric": "throughput_gib_s", "value": 13.0}}


def _record():
    return {"exit_code": 0, "bytes": 64 << 30, "elapsed_s": 5.0, "throughput_gib_s": 12.8,
            "path": {"mode": "nvfs", "evidence": ["nvfs reads +8"]}, "errors": 0, "verify_errors": 0}


def _fleet_docs():
    docs = {}
    for number, value in enumerate((12.0, 12.2, 11.9, 12.1)):
        docs["node%d" % number] = {"checks": [check("bench: md1 seq_read: throughput_gib_s", "PASS", ">= 9 GiB/s",
                                                    value, low=9.0, unit="GiB/s", reference=10.0,
                                                    job="md1 seq_read", metric="throughput_gib_s")]}
    return docs, {host: "dgx_h100" for host in docs}


def _history():
    doc = {"checks": [check("bench: md1 seq_read: throughput_gib_s", "PASS", ">= 9 GiB/s", 12.0, low=9.0,
                            unit="GiB/s", reference=10.0, job="md1 seq_read", metric="throughput_gib_s")]}
    return doc, [{"verdict": "PASS", "run_id": "r1", "values": {"md1 seq_read: throughput_gib_s": 12.1}}]


CASES = {
    "affinity:topology_checks": Case(
        lambda: (topology_checks, [_topology()], {"expect": {"gpus": 2, "data_drives": 1, "nics": 1, "groups": 1},
                                                  "profile": "dgx_h100"}),
        [((0, "gpus"), r"topology: gpus$"), ((0, "nvme"), r"data_drives"), ((0, "nics"), r"topology: nics"),
         ((0, "groups"), r"topology: (groups|every group)"), ((0, "groups", 0, "nvme"), r"every group"),
         (("profile",), r"platform profile"), ((0,), r"topology: (gpus|data_drives|nics|groups|every)")]),
    "acs:acs_checks": Case(
        lambda: (acs_checks, [{"bridges": [
            {"bdf": "0000:00:01.1", "acs_offset": 256, "before": "0x001d", "after": "0x0000"},
            {"bdf": "0000:06:00.0", "acs_offset": 256, "before": "0x001d", "after": "0x0000"}],
            "vfio_devices": []}, "disabled"], {"live": False}),
        [((0, "bridges", 0, "after"), r"acs: disabled"), ((0, "bridges", 1), r"acs: disabled"),
         ((0, "bridges"), r"acs: disabled"), ((0,), r"acs: disabled")]),
    "acs:_acs_persistence": Case(
        lambda: (tune_acs._acs_persistence, [2, "cmdline", "config_acs", None, True,
                                                {"kernel": {"release": "6.8.0"}, "acs_cmdline": {"device_lists": True}}], {}),
        [((5, "acs_cmdline", "device_lists"), r"kept disabled"), ((5, "acs_cmdline"), r"kept disabled")]),
    "iommu:iommu_checks": Case(
        lambda: (iommu_checks, [{"mode": "pt", "units": ["dmar0"], "groups": 40, "cmdline": "iommu=pt"}, "pt"],
                 {"live": False, "dropin": "/etc/default/grub.d/99-gds-iommu.cfg", "params": "iommu=pt"}),
        [((0, "mode"), r"iommu: mode"), ((0,), r"iommu: mode")]),
    "driver:driver_checks": Case(
        lambda: (driver_checks, [_platform(), "nvfs"], {"gpus": 2}),
        [((0, "nvidia_driver", "loaded"), r"NVIDIA kernel module"), ((0, "nvidia_driver"), r"NVIDIA kernel module"),
         ((0, "nvidia_fs", "loaded"), r"nvidia-fs loaded"), ((0, "nvidia_fs", "proc_version"), r"nvidia-fs loaded"),
         ((0, "nvidia_fs", "rw_stats_enabled"), r"IO statistics"), ((0, "nvidia_fs"), r"nvidia-fs"),
         ((0, "udev", "readable"), r"udev"), ((0, "udev", "missing"), r"udev"), ((0, "udev", "devices"), r"udev"),
         ((0, "udev"), r"udev"), ((0, "arch"), None), ((0, "nvme_multipath"), None)]),
    "driver:p2pdma_pairs_check": Case(
        lambda: (p2pdma_pairs_check, [_p2p_topology()], {}),
        [((0, "p2pdma", "pairs", 0, "map"), r"P2PDMA pairs"), ((0, "p2pdma", "pairs", 1, "provider"), r"P2PDMA pairs"),
         ((0, "p2pdma", "pairs", 0), r"P2PDMA pairs"), ((0, "p2pdma", "pairs"), r"P2PDMA pairs"),
         ((0, "p2pdma"), r"P2PDMA pairs"), ((0, "nvme", 0, "bdf"), r"P2PDMA pairs")]),
    "p2p_probe:answer_check": Case(
        lambda: (p2p_probe.answer_check, [{"provider": "0000:04:00.0", "target": "raid1", "predicted": "bus_address",
                                           "reason": "switch", "moved": True, "bytes": 4194304, "seconds": 0.1,
                                           "verify_errors": 0, "error": None, "kernel_log": []}], {}),
        [((0, "predicted"), r"p2pdma"), ((0, "moved"), r"p2pdma")]),
    "driver:udev_check": Case(
        lambda: (udev_check, [_platform()["udev"]], {}),
        [((0, "readable"), r"udev"), ((0, "missing"), r"udev"), ((0, "devices"), r"udev"),
         ((0, "devices", 0), r"udev"), ((0, "devices", 0, "dev"), None)]),
    "driver:udev_record_check": Case(
        # a file that exists stands for /run/udev/data/b259:0
        lambda: (udev_record_check, ["bench: j: udev record", os.path.abspath(__file__), [259, 0]], {}),
        [((2,), r"udev record"), ((2, 0), r"udev record"), ((1,), r"udev record")]),
    "affinity:visibility_checks": Case(
        lambda: (visibility_checks, [{"bridges": [{"bdf": "0000:00:01.1", "acs_unknown": None}]}, []], {}),
        [((0, "bridges"), r"ACS state readable"), ((0,), r"ACS state readable"), ((1,), r"without warnings")]),
    "health:link_checks": Case(
        lambda: (link_checks, list(_links()), {}),
        [((0, 0, "current_width"), r"08:00.0"), ((0, 0, "expected_width"), r"08:00.0"),
         ((0, 0, "current_speed_gts"), r"08:00.0"), ((0, 0, "expected_speed_gts"), r"08:00.0"),
         ((0, 1, "current_width"), r"07:00.0"), ((0, 1, "expected_width"), r"07:00.0"),
         ((1, "0000:07:00.0", "max_gen_seen"), r"07:00.0"),
         ((1, "0000:07:00.0"), r"07:00.0", "a GPU NVML did not sample: its speed is not judged, its width is"),
         ((0, 1, "expected_speed_gts"), None), ((1, "0000:07:00.0", "max_gen"), None),
         ((1, "0000:07:00.0", "samples"), None)]),
    "health:aer_checks": Case(
        lambda: (aer_checks, list(_aer()) + [5], {}),
        [((1, "0000:08:00.0", "fatal"), r"aer"), ((0, "0000:08:00.0", "fatal"), r"aer"),
         ((1, "0000:08:00.0", "correctable"), r"aer"), ((0, "0000:08:00.0", "correctable"), r"aer"),
         ((1, "0000:08:00.0"), r"aer"), ((0, "0000:08:00.0"), r"aer"), ((2,), None)]),
    "cufile:report_checks": Case(
        lambda: (report_checks, [{"properties": {"allow_compat_mode": False, "use_pci_p2pdma": False,
                                                 "rdma_dev_addr_list": ["10.0.0.1"]}}, "nvfs",
                                 {"state": "in place", "file": "/etc/cufile.json", "keys": []}],
                 {"rdma_storage": True, "rdma_nics": [{"nic": "mlx5_0", "address": "10.0.0.1"}]}),
        [(("rdma_nics", 0, "address"), r"rdma_dev_addr_list"),
         ((0, "properties", "rdma_dev_addr_list"), r"rdma_dev_addr_list"),
         ((0, "properties", "rdma_dev_addr_list", 0), r"rdma_dev_addr_list")]),
    "cufile_remote:remote_fs_check": Case(
        lambda: (remote_fs_check, [{"version": "1.13.0", "source": "libcufile.so.1.13.0",
                                    "keys": {"properties": ["rdma_load_balancing_policy"]}},
                                   [{"mountpoint": "/mnt/nfs", "address": "10.0.0.1"}], [], None], {}),
        [((1, 0, "address"), r"remote file systems"), ((1, 0), r"remote file systems"),
         ((1,), r"remote file systems")]),
    "mounts:mount_checks": Case(
        lambda: (mount_checks, [[_mount()], _topology()], {"expect_rdma": True}),
        [((0, 0, "rsize"), r"rsize/wsize"), ((0, 0, "wsize"), r"rsize/wsize"), ((0, 0, "transport"), r"transport"),
         ((0, 0, "netdev"), r"NIC affinity"), ((0, 0, "nics"), r"NIC affinity"), ((0, 0, "nics", 0), r"NIC affinity"),
         ((0, 0, "errors"), None), ((0, 0, "port"), None)]),
    "mounts:_affinity_checks": Case(
        lambda: (mount_checks, [[_mount()], _topology()], {}),
        [((0, 0, "netdev"), r"NIC affinity"), ((0, 0, "nics"), r"NIC affinity"),
         ((1, "matrix", "GPU0", "mlx5_0"), r"NIC affinity")], raises=(NetfsError,)),
    "raid:raid_checks": Case(
        lambda: (raid_checks, [{"arrays": [{"name": "md1", "action": "keep", "md": "md1", "mount": "/raid/g0",
                                            "members": ["nvme0n1", "nvme2n1"], "gpus": [0, 1]}],
                                "actions": [], "refused": [], "summary": ["1 array kept"]}], {}),
        [((0, "arrays", 0, "md"), r"raid: md1"), ((0, "arrays", 0, "mount"), r"raid: md1"),
         ((0, "arrays", 0, "members"), r"raid: md1")]),
    "raid:_array_check": Case(
        lambda: (raid_checks, [{"arrays": [{"name": "g0", "action": "create", "device": "/dev/md/g0",
                                            "mount": "/raid/g0", "members": ["nvme0n1"], "gpus": [0]}],
                                "actions": [], "refused": [], "summary": []}], {"changed": True}),
        [((0, "arrays", 0, "device"), r"raid: g0"), ((0, "arrays", 0, "mount"), r"raid: g0"),
         ((0, "arrays", 0, "members", 0), r"raid: g0")]),
    "rdma:pairing_checks": Case(
        lambda: (pairing_checks, [_topology(), "PXB"], {}),
        [((0, "gpus", 0, "nic_link"), r"GPU0 NIC"), ((0, "gpus", 0, "nics"), r"GPU0 NIC"),
         ((0, "gpus", 0, "nics", 0), r"GPU0 NIC"), ((0, "gpus", 1, "nic_link"), r"GPU1 NIC")]),
    "rdma:port_checks": Case(
        lambda: (port_checks, [_topology(), 200], {}),
        [((0, "nics", 0, "ports", 0, "state"), r"port mlx5_0"), ((0, "nics", 0, "ports", 0, "phys_state"), r"port mlx5_0"),
         ((0, "nics", 0, "ports", 0, "rate_gbps"), r"port mlx5_0"), ((0, "nics", 0, "ports", 0), r"port mlx5_0"),
         ((0, "nics", 0, "ports"), r"port mlx5_0")]),
    "rdma:peermem_check": Case(
        lambda: (peermem_check, [{"want": "auto", "method": "nvidia_peermem", "reason": "shipped with the driver",
                                  "module": "nvidia_peermem", "loaded": True,
                                  "persisted": ["/etc/modules-load.d/nvidia_peermem.conf"], "skip": None}], {}),
        [((0, "loaded"), r"peer memory"), ((0, "persisted"), r"peer memory"), ((0, "persisted", 0), r"peer memory"),
         ((0, "method"), r"peer memory")]),
    "perftest:row_check": Case(
        lambda: (lambda rows: [perftest.row_check(r) for r in rows], [_perftest_rows()[0]], {}),
        [((0, 0, "gbps"), r"mlx5_0 port 1 ib_write_bw host"), ((0, 0, "threshold_gbps"), r"ib_write_bw host"),
         ((0, 1, "gbps"), r"ib_write_bw cuda GPU0$"), ((0, 3, "lat_us"), r"ib_write_lat host"),
         ((0, 0, "rate_gbps"), None)]),
    "perftest:affinity_checks": Case(
        lambda: (perftest.affinity_checks, [_perftest_rows()[0], [1.1, -0.1, None, "x"]], {}),
        [((0, 1, "gbps"), r"affinity gain"), ((0, 2, "gbps"), r"affinity gain")]),
    "thresholds:evaluate": Case(
        lambda: (thresholds.evaluate, ["throughput_gib_s", [10.0, -0.1, None, "GiB/s"], 12.0], {}),
        [((2,), r"throughput")]),
    "thresholds:path_check": Case(
        lambda: (thresholds.path_check, [_record(), 0, "nvfs"], {}),
        [((0, "path", "mode"), r"io path"), ((0, "path"), r"io path"), ((0, "path", "evidence"), None)]),
    "thresholds:run_check": Case(
        lambda: (thresholds.run_check, ["bench: j: ", _record()], {}),
        [((1, "bytes"), r"run"), ((1, "exit_code"), None), ((1, "elapsed_s"), None)]),
    "thresholds:job_checks": Case(
        lambda: (thresholds.job_checks, [_job(), _record()], {}),
        [((1, "bytes"), r"bench: "), ((1, "throughput_gib_s"), r"throughput_gib_s"),
         ((1, "path", "mode"), r"io path"), ((0, "spec", "value"), r"fraction_of_spec"), ((1, "errors"), None),
         ((1, "verify_errors"), None), ((0, "spec"), None)]),
    "gds_bench:compare_check": Case(
        lambda: (gds_bench.compare_check,
                 [{"name": "a", "compare": {"job": "b", "metric": "throughput_gib_s", "as": "affinity_gain",
                                            "threshold": [1.1, -0.1, None, "x"]}},
                  {"record": {"throughput_gib_s": 12.0}}, {"b": {"throughput_gib_s": 8.0}}], {}),
        [((1, "record", "throughput_gib_s"), r"affinity_gain"), ((2, "b", "throughput_gib_s"), r"affinity_gain"),
         ((2, "b"), r"affinity_gain")]),
    "report_inputs:normalize_check": Case(
        lambda: (report.normalize_check, [{"name": "bench: j: run", "verdict": "PASS", "expected": "x",
                                           "actual": "exit 0, 1 bytes"}], {}),
        [((0, "actual"), r"bench: j: run")]),
    "report_baselines:fleet_checks": Case(
        lambda: (lambda docs, platforms: report.fleet_checks(docs, platforms).get("node0"), list(_fleet_docs()), {}),
        [((0, "node0", "checks", 0, "actual"), r"fleet"), ((0, "node1", "checks", 0, "actual"), None)]),
    "report_baselines:history_checks": Case(
        lambda: (lambda doc, runs: report.history_checks("node0", doc, runs), list(_history()), {}),
        [((0, "checks", 0, "actual"), r"history"), ((1, 0, "values", "md1 seq_read: throughput_gib_s"), r"history")]),
    "devhealth:gpu_health_check": Case(
        lambda: (gpu_health_check, [0, _gpu_facts(), 0, 20, health_thresholds({})], {}),
        [((1, "ecc_uncorrected_volatile"), r"gpu: health"), ((1, "retired_pages_pending"), r"gpu: health"),
         ((1, "remapped_rows"), r"gpu: health"), ((1, "remapped_rows", "pending"), r"gpu: health"),
         ((1, "remapped_rows", "failure"), r"gpu: health"), ((1, "ecc_uncorrected_aggregate"), r"gpu: health"),
         ((2,), r"gpu: health"), ((3,), r"gpu: health")]),
    "devhealth:nvme_health_check": Case(
        lambda: (nvme_health_check, ["nvme0", _nvme_smart(), _nvme_smart(), health_thresholds({})], {}),
        [((2, "critical_warning"), r"nvme: health"), ((2, "media_errors"), r"nvme: health"),
         ((2, "percentage_used"), r"nvme: health"), ((2, "temperature_c"), r"nvme: health")]),
    "diskload:drive_load_check": Case(
        lambda: (drive_load_check, ["bench: j: ", _drive_load(), "read", {}, dict(DEFAULT_THRESHOLDS)], {}),
        [((1, "drives", 0, "read_bytes"), r"drive load"), ((1, "drives", 0, "r_await_ms"), r"drive load"),
         ((1, "drives", 1), r"drive load"), ((1, "drives"), r"drive load")]),
    "diskload:drives_served_check": Case(
        lambda: (drives_served_check, ["bench: j: ", _drive_load(), "read", {}, False, 8 << 30], {}),
        [((1, "drives", 0, "read_bytes"), r"drives served"), ((1, "drives", 0, "r_await_ms"), r"drives served"),
         ((1, "drives", 1), r"drives served"), ((1, "drives"), r"drives served"), ((5,), r"drives served")]),
    "pcie_traffic:bounce_check": Case(
        lambda: (bounce_check, ["bench: j: ", 0, 8 << 30, "read", _gpu_traffic(), _topology(), ["nvme0n1"],
                                dict(DEFAULT_THRESHOLDS)], {}),
        [((2,), r"bounce"), ((4, 0, "rx_bytes"), r"bounce"), ((4, 1, "rx_bytes"), r"bounce"),
         ((4, 1), r"bounce"), ((4,), r"bounce")]),
    "pcie_traffic:_cufile_bounce": Case(
        lambda: (pcie_traffic._cufile_bounce, ["bench: j: bounce", 0, {"source": "gds_stats", "buffer_gpus": [0], "io_gpus": [0],
                                                                      "gpus": [{"index": 0, "pool_used": 3, "pool_total": 64}]},
                                               "only GPU0", "WARN", lambda g: "GPU%s" % g["index"], "no figures"], {}),
        [((2, "io_gpus"), r"bounce"), ((2, "io_gpus", 0), r"bounce"), ((2, "buffer_gpus"), r"bounce"),
         ((2, "buffer_gpus", 0), r"bounce")]),
    "concurrency:scaling_check": Case(
        lambda: (concurrency.scaling_check, ["bench: j: ", {"scaling": 0.95, "aggregate_gib_s": 19.0,
                                                             "singles_gib_s": 20.0}, [0.9, 0.0, None, "x"]], {}),
        [((1, "scaling"), r"scaling"), ((1,), r"scaling"), ((1, "aggregate_gib_s"), None)]),
    "concurrency:ceiling_check": Case(
        lambda: (concurrency.ceiling_check, ["bench: j: ", {"job": "h", "gib_s": 2.0, "fraction": 0.95}, 0.8], {}),
        [((1, "fraction"), r"ceiling_fraction"), ((1,), r"ceiling_fraction"), ((1, "gib_s"), None)]),
    "concurrency:every_gpu_check": Case(
        lambda: (concurrency.every_gpu_check, [[0, 1], [{"name": "a", "gpu": 0}, {"name": "b", "gpu": 1}],
                                               [{"name": "a", "checks": [{"verdict": "PASS"}]},
                                                {"name": "b", "checks": [{"verdict": "PASS"}]}]], {}),
        [((0, 1), r"every GPU"), ((0,), r"every GPU"), ((1, 1, "gpu"), r"every GPU"),
         ((2, 1, "checks", 0, "verdict"), r"every GPU"), ((2, 1, "checks"), r"every GPU"),
         ((2, 1, "name"), r"every GPU"), ((1, 1, "name"), r"every GPU")]),
    "watch:JobWatch.fraction_check": Case(
        lambda: (_watch().fraction_check, ["bench: j: ", {"gb_s": 15.8, "bound": "drives", "bytes_per_s": 15.8e9},
                                           0.85], {}),
        [((2,), r"path_fraction"), ((1, "gb_s"), None)]),
}


# --------------------------------------------------------------------------------------------
# Running them
# --------------------------------------------------------------------------------------------
def _as_list(result):
    if result is None:
        return []
    return result if isinstance(result, list) else [result]


def _parent(args, kwargs, path):
    """(the container holding the value at ``path``, its key there); KeyError or IndexError when
    the good input has no such value (a path that would only add a member tests nothing)."""
    parent, key = (args, path[0]) if isinstance(path[0], int) else (kwargs, path[0])
    for part in path[1:]:
        parent, key = parent[key], part
    parent[key]  # pylint: disable=pointless-statement
    return parent, key


def _run(case, path=None, value=None):
    function, args, kwargs = case.make()
    holder = {"args": args, "kwargs": kwargs}
    if path is not None:
        parent, key = _parent(args, kwargs, path)
        if value is MISSING:
            del parent[key]
        else:
            parent[key] = copy.deepcopy(value)
    return _as_list(function(*holder["args"], **holder["kwargs"]))


def _show(value):
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return str(value) if value is not MISSING else "missing"


GOOD = [(name, entry[0], entry[1]) for name, case in sorted(CASES.items()) for entry in case.paths]
HOSTILE_RUNS = [
    pytest.param(name, entry[0], entry[1], value,
                 id="%s-%s-%s" % (name, "/".join(map(str, entry[0])), _show(value)))
    for name, case in sorted(CASES.items()) for entry in case.paths for value in HOSTILE
    # a missing member is a dict's key (an argument or a list entry left out is another input),
    # and only where its absence does not mean something of its own
    if value is not MISSING or (len(entry[0]) > 1 and isinstance(entry[0][-1], str) and len(entry) == 2)]


@pytest.mark.parametrize("name, path, pattern", GOOD, ids=["%s-%s" % (n, "/".join(map(str, p))) for n, p, dummy in GOOD])
def test_good_input_passes(name, path, pattern):
    """Each judged path is in the good input and leads to a check that PASSes on it: the hostile
    runs can fail."""
    dummy, args, kwargs = CASES[name].make()
    _parent(args, kwargs, path)
    checks = _run(CASES[name])
    assert not pattern or [c for c in checks if re.search(pattern, c["name"]) and c["verdict"] == "PASS"], checks


@pytest.mark.parametrize("name, path, pattern, value", HOSTILE_RUNS)
def test_unknown_input_is_never_pass(name, path, pattern, value):
    case = CASES[name]
    try:
        checks = _run(case, path, value)
    except case.raises as exc:  # refused, naming the key at fault: no verdict at all
        assert str(path[-1]) in str(exc), exc
        return
    for found in checks:
        assert found["verdict"] in core_checks.VERDICTS
        assert not (pattern and re.search(pattern, found["name"]) and found["verdict"] == "PASS"), \
            "%s with %s = %s judged PASS: %s" % (name, "/".join(map(str, path)), _show(value), found)
