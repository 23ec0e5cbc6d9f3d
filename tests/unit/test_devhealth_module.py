"""gds_bench's health checks end to end: a fake pynvml sampled while a fake benchmark runs, AER
counters in a sysfs tree that the benchmark bumps, a fake nvme-cli."""
import json
import os
import stat

import pytest

from conftest import run_module
from test_gds_bench import RECORD

GPU = "0000:18:00.0"
PORT = "0000:17:00.0"

# Answers like one H100 whose link idles at Gen1 and trains to Gen5 while the benchmark's load
# flag exists; it notes that it answered under load so the benchmark can end (no timing).
FAKE_PYNVML = '''
import os
class NVMLError(Exception):
    pass
class NVMLError_NotSupported(NVMLError):
    def __str__(self):
        return "Not Supported"
class _O(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
def _loaded():
    if os.path.exists(os.environ["FAKE_NVML_LOAD"]):
        open(os.environ["FAKE_NVML_SEEN"], "w").close()
        return True
    return False
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetPciInfo(h): return _O(busId=b"00000000:18:00.0")
def nvmlDeviceGetCurrPcieLinkGeneration(h): return 5 if _loaded() else 1
def nvmlDeviceGetCurrPcieLinkWidth(h): return int(os.environ.get("FAKE_NVML_WIDTH", "16"))
def nvmlDeviceGetMaxPcieLinkGeneration(h): return 5
def nvmlDeviceGetMaxPcieLinkWidth(h): return 16
def nvmlDeviceGetCurrentClocksThrottleReasons(h):  # an older pynvml: the Throttle name only
    return int(os.environ.get("FAKE_NVML_REASONS", "0")) if _loaded() else 1
def nvmlDeviceGetTotalEccErrors(h, t, c): return 0
def nvmlDeviceGetRetiredPagesPendingStatus(h): raise NVMLError_NotSupported()
def nvmlDeviceGetRetiredPages(h, c): raise NVMLError_NotSupported()
def nvmlDeviceGetRemappedRows(h): return (0, 0, os.environ.get("FAKE_NVML_PENDING") == "1", False)
'''

# The benchmark: load on, wait until NVML was sampled under load, bump AER counters, load off.
BENCH = '''#!/bin/bash
touch "$FAKE_NVML_LOAD"
for i in $(seq 200); do [ -e "$FAKE_NVML_SEEN" ] && break; sleep 0.05; done
[ -n "$BUMP" ] && printf '%%s' "$BUMP_TEXT" > "$BUMP"
rm -f "$FAKE_NVML_LOAD"
echo '%s'
'''

AER_COR = "RxErr 0\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR %d\n"
AER_NONFATAL = ("Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO %d\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\n"
                "ECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\n"
                "PoisonTLPBlocked 0\nTOTAL_ERR_NONFATAL %d\n")
AER_FATAL = AER_NONFATAL.replace("TOTAL_ERR_NONFATAL", "TOTAL_ERR_FATAL")


def sysfs_tree(root):
    """/sys with the root port and the GPU below it, AER counters at zero, linked from bus/pci."""
    devices = root / "devices" / "pci0000:17"
    port = devices / PORT
    gpu = port / GPU
    for dev in (port, gpu):
        dev.mkdir(parents=True)
        (dev / "aer_dev_correctable").write_text(AER_COR % 0)
        (dev / "aer_dev_nonfatal").write_text(AER_NONFATAL % (0, 0))
        (dev / "aer_dev_fatal").write_text(AER_FATAL % (0, 0))
    for name in ("aer_rootport_total_err_cor", "aer_rootport_total_err_fatal", "aer_rootport_total_err_nonfatal"):
        (port / name).write_text("0\n")
    bus = root / "bus" / "pci" / "devices"
    bus.mkdir(parents=True)
    for dev in (port, gpu):
        os.symlink(os.path.relpath(dev, bus), bus / dev.name)
    return gpu


def pcie_links():
    return [
        {"bdf": PORT, "kind": "bridge", "current_speed_gts": 32.0, "max_speed_gts": 32.0, "current_width": 16,
         "max_width": 16, "expected_speed_gts": 32.0, "expected_width": 16, "degraded": False, "upstream": None,
         "problem": None},
        {"bdf": GPU, "kind": "gpu", "current_speed_gts": 2.5, "max_speed_gts": 32.0, "current_width": 16,
         "max_width": 16, "expected_speed_gts": 32.0, "expected_width": 16, "degraded": True, "upstream": PORT,
         "problem": None},
    ]


@pytest.fixture
def node(tmp_path, monkeypatch):
    mod = tmp_path / "fake_pynvml"
    mod.mkdir()
    (mod / "pynvml.py").write_text(FAKE_PYNVML)
    monkeypatch.syspath_prepend(str(mod))  # run_module passes sys.path on as PYTHONPATH
    monkeypatch.setenv("FAKE_NVML_LOAD", str(tmp_path / "load"))
    monkeypatch.setenv("FAKE_NVML_SEEN", str(tmp_path / "seen"))
    bench = tmp_path / "gdsbench"
    bench.write_text(BENCH % json.dumps(RECORD))
    bench.chmod(bench.stat().st_mode | stat.S_IEXEC)
    nvme = tmp_path / "nvme"
    nvme.write_text("#!/bin/sh\necho '%s'\n" % json.dumps({"critical_warning": 0, "temperature": 310,
                                                            "percent_used": 1, "media_errors": 0}))
    nvme.chmod(0o755)
    gpu_dir = sysfs_tree(tmp_path / "sys")
    return {"tmp": tmp_path, "bench": str(bench), "nvme": str(nvme), "sys": str(tmp_path / "sys"), "gpu_dir": gpu_dir}


def args(node, **extra):
    job = {"name": "r", "target": str(node["tmp"] / "data"), "gpu": 0, "io_type": "read", "duration": 1,
           "thresholds": {}}
    base = {"binary": node["bench"], "udev_root": "", "jobs": [job], "pcie_links": pcie_links(),
            "sysfs_root": node["sys"], "nvme_devices": ["nvme0"], "nvme_cli": node["nvme"], "nvml_interval": 0.05}
    base.update(extra)
    return base


def test_link_judged_under_load_and_health_checks(node):
    rc, result = run_module("gds_bench", args(node))
    assert rc == 0, result
    checks = {c["name"]: c for c in result["checks"]}
    link = checks["pcie: link %s under load" % GPU]
    assert link["verdict"] == "PASS", link
    load = result["health"]["gpu_load"][GPU]
    assert load["first_gen"] == 1 and load["max_gen_seen"] == 5 and load["max_width_seen"] == 16
    assert checks["pcie: aer %s" % GPU]["verdict"] == "PASS" and checks["pcie: aer %s" % PORT]["verdict"] == "PASS"
    assert checks["nvme: health nvme0"]["verdict"] == "PASS" and "37" in checks["nvme: health nvme0"]["actual"]
    gpu = checks["gpu: health 0"]
    assert gpu["verdict"] == "PASS" and "not supported" in gpu["detail"]  # retired pages on Hopper


def test_x8_under_load_fails(node, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_WIDTH", "8")
    rc, result = run_module("gds_bench", args(node))
    assert rc == 0, result
    link = [c for c in result["checks"] if c["name"] == "pcie: link %s under load" % GPU][0]
    assert link["verdict"] == "FAIL"


def test_nonfatal_aer_error_during_the_run_fails(node, monkeypatch):
    monkeypatch.setenv("BUMP", str(node["gpu_dir"] / "aer_dev_nonfatal"))
    monkeypatch.setenv("BUMP_TEXT", AER_NONFATAL % (1, 1))
    rc, result = run_module("gds_bench", args(node))
    assert rc == 0, result
    checks = {c["name"]: c for c in result["checks"]}
    aer = checks["pcie: aer %s" % GPU]
    assert aer["verdict"] == "FAIL" and GPU in aer["detail"] and "nonfatal" in aer["detail"]
    assert checks["pcie: aer %s" % PORT]["verdict"] == "PASS"


def test_correctable_errors_above_the_profile_limit_warn(node, monkeypatch):
    monkeypatch.setenv("BUMP", str(node["gpu_dir"] / "aer_dev_correctable"))
    monkeypatch.setenv("BUMP_TEXT", AER_COR % 12)
    rc, result = run_module("gds_bench", args(node, health_thresholds={"aer_correctable_limit": 10}))
    assert [c["verdict"] for c in result["checks"] if c["name"] == "pcie: aer %s" % GPU] == ["WARN"]
    rc, result = run_module("gds_bench", args(node, health_thresholds={"aer_correctable_limit": 20}))
    assert [c["verdict"] for c in result["checks"] if c["name"] == "pcie: aer %s" % GPU] == ["PASS"]


def test_throttle_and_pending_rows_during_the_run(node, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_REASONS", str(0x40 | 0x8))  # HW thermal slowdown
    monkeypatch.setenv("FAKE_NVML_PENDING", "1")
    rc, result = run_module("gds_bench", args(node))
    gpu = [c for c in result["checks"] if c["name"] == "gpu: health 0"][0]
    assert gpu["verdict"] == "FAIL" and "hw_thermal" in gpu["actual"] and "remapped rows pending" in gpu["actual"]
    assert "hw_thermal" in result["health"]["gpus"]["0"]["clock_events"]


def test_cpu_jobs_sample_no_gpu_and_bad_thresholds_are_named(node):
    job = {"name": "r", "target": str(node["tmp"] / "data"), "xfer_type": 1, "io_type": "read", "thresholds": {}}
    rc, result = run_module("gds_bench", args(node, jobs=[job]))
    assert rc == 0 and not [c for c in result["checks"] if c["name"].startswith(("gpu: ", "pcie: link"))]
    assert result["health"]["gpu_load"] == {}
    rc, result = run_module("gds_bench", args(node, health_thresholds={"gpu_throttle_fail": "hw_thermal"}))
    assert rc != 0 and "gpu_throttle_fail" in result["msg"] and "Traceback" not in result["msg"]


def test_check_mode_reads_nothing(node):
    rc, result = run_module("gds_bench", args(node), check_mode=True)
    assert rc == 0 and "health" not in result
    assert not [c for c in result["checks"] if not c["name"].startswith("bench: ")]
