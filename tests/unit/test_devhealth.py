"""Device health around the benchmark: NVML link and clock-event sampling, GPU memory health,
NVMe SMART health (nvme-cli or sysfs) and the health thresholds."""
import json
import stat

import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import (
    HealthConfigError, HealthRun, NvmlSampler, gpu_memory_health, health_thresholds, nvme_smart,
)

GPU = "0000:18:00.0"
SWITCH_PORT = "0000:17:00.0"


def links(width=16):
    gpu = {"bdf": GPU, "kind": "gpu", "current_speed_gts": 2.5, "max_speed_gts": 32.0,
           "current_width": width, "max_width": 16, "expected_speed_gts": 32.0, "expected_width": 16,
           "degraded": True, "upstream": SWITCH_PORT, "problem": None}
    port = {"bdf": SWITCH_PORT, "kind": "bridge", "current_speed_gts": 32.0, "max_speed_gts": 32.0,
            "current_width": 16, "max_width": 16, "expected_speed_gts": 32.0, "expected_width": 16,
            "degraded": False, "upstream": None, "problem": None}
    return [gpu, port]


class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):  # noqa: N801 (pynvml's name)
    def __str__(self):
        return "Not Supported"


class FakeNvml(object):
    """pynvml for one H100 at 0000:18:00.0: its link trains down to Gen1 when idle and up to
    ``load_gen`` x ``load_width`` while ``loaded``; retired pages are not supported (Hopper)."""

    class _Obj(object):
        def __init__(self, **kw):
            self.__dict__.update(kw)

    def __init__(self, load_gen=5, load_width=16, reasons=0, remapped=(0, 0, False, False), ecc=0,
                 unsupported=()):
        self.loaded = False
        self.load_gen, self.load_width, self.reasons = load_gen, load_width, reasons
        self.remapped, self.ecc, self.unsupported = remapped, ecc, set(unsupported)
        self.ecc_before_boot = 0
        self.shutdown = False

    def _maybe(self, name):
        if name in self.unsupported:
            raise NVMLError_NotSupported()

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        self.shutdown = True

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetPciInfo(self, handle):
        return self._Obj(busId=b"00000000:18:00.0")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle):
        self._maybe("gen")
        return self.load_gen if self.loaded else 1

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle):
        self._maybe("gen")
        return self.load_width  # the width does not change with load, the speed does

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle):
        self._maybe("gen")
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle):
        self._maybe("gen")
        return 16

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, handle):
        return 5

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        self._maybe("reasons")
        return self.reasons if self.loaded else 0x1  # idle

    def nvmlDeviceGetTotalEccErrors(self, handle, error_type, counter_type):
        self._maybe("ecc")
        return self.ecc if counter_type == 0 else self.ecc + self.ecc_before_boot

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle):
        raise NVMLError_NotSupported()

    def nvmlDeviceGetRetiredPages(self, handle, cause):
        raise NVMLError_NotSupported()

    def nvmlDeviceGetRemappedRows(self, handle):
        self._maybe("remap")
        return self.remapped


def run_health(fake, width=16, thresholds=None, idle_samples=1, load_samples=3):
    """A benchmark as the sampler sees it: idle samples, then samples under load."""
    health = HealthRun(links(width), sysfs_root="/nonexistent", thresholds=thresholds,
                       gpu_indices=[0], interval=3600, pynvml=fake)
    health.begin()  # one sample at start: idle
    for _ in range(idle_samples - 1):
        health.sampler.sample()
    fake.loaded = True
    for _ in range(load_samples):
        health.sampler.sample()
    fake.loaded = False
    health.end()
    return {c["name"]: c for c in health.checks()}, health


def test_idle_gen1_then_gen5_under_load_passes():
    fake = FakeNvml()
    checks, health = run_health(fake)
    link = checks["pcie: link %s under load" % GPU]
    assert link["verdict"] == "PASS" and "5" in str(link["actual"]) and "16" in str(link["actual"])
    assert link["bdf"] == GPU and link["under_load"] is True  # what the report matches it by
    load = health.gpu_load()[GPU]
    assert (load["first_gen"], load["max_gen_seen"], load["max_gen"], load["samples"]) == (1, 5, 5, 4)
    assert fake.shutdown


def test_idle_only_samples_are_not_judged_under_load():
    """A GPU never sampled under load (the run broke at once) keeps its idle Gen1 as max seen:
    the sampler reports what it saw, it does not make up a load sample."""
    fake = FakeNvml()
    checks, health = run_health(fake, load_samples=0)
    assert health.gpu_load()[GPU]["max_gen_seen"] == 1


def test_x8_of_x16_under_load_fails():
    checks, _ = run_health(FakeNvml(load_width=8), width=8)
    link = checks["pcie: link %s under load" % GPU]
    assert link["verdict"] == "FAIL" and "8" in str(link["actual"])


@pytest.mark.parametrize("mask,verdict,word", [
    (0x40, "FAIL", "hw_thermal"),        # HW thermal slowdown
    (0x80 | 0x8, "FAIL", "hw_power_brake"),
    (0x20, "WARN", "sw_thermal"),
    (0x4, "PASS", "sw_power_cap"),       # the power cap under load is normal: reported, not judged
])
def test_clock_event_reasons_during_the_run(mask, verdict, word):
    checks, health = run_health(FakeNvml(reasons=mask))
    gpu = checks["gpu: health 0"]
    assert gpu["verdict"] == verdict and word in (gpu["actual"] + gpu.get("detail", ""))
    assert "gpu_idle" in health.facts()["gpus"]["0"]["clock_events"]  # the idle sample before the job


def test_remapped_rows_pending_fails_and_retired_pages_are_unknown_on_hopper():
    checks, health = run_health(FakeNvml(remapped=(0, 1, True, False)))
    gpu = checks["gpu: health 0"]
    assert gpu["verdict"] == "FAIL" and "remapped rows pending" in gpu["actual"]
    assert "not supported on this GPU: retired_pages_pending" in gpu["detail"]
    facts = health.facts()["gpus"]["0"]
    assert facts["retired_pages_pending"] is None and facts["remapped_rows"]["pending"] is True
    checks, _ = run_health(FakeNvml(remapped=(0, 1, True, False)), thresholds={"gpu_remapped_rows_pending": False})
    assert checks["gpu: health 0"]["verdict"] == "WARN"
    checks, _ = run_health(FakeNvml(remapped=(2, 0, False, True)))
    assert checks["gpu: health 0"]["verdict"] == "FAIL" and "row remapping failed" in checks["gpu: health 0"]["actual"]


def test_uncorrectable_ecc_fails():
    checks, _ = run_health(FakeNvml(ecc=3))
    assert checks["gpu: health 0"]["verdict"] == "FAIL" and "3 uncorrectable ECC" in checks["gpu: health 0"]["actual"]


def test_nothing_supported_is_unknown_never_a_failure():
    fake = FakeNvml(unsupported={"gen", "reasons", "ecc", "remap"})
    checks, health = run_health(fake)
    assert not [n for n in checks if n.startswith("pcie: link")]  # no link sample: nothing judged under load
    gpu = checks["gpu: health 0"]
    assert gpu["verdict"] == "SKIP" and "not supported" in gpu["detail"]
    assert health.gpu_load() == {}


def test_nvml_init_failure_is_a_skip_with_the_reason():
    class Broken(FakeNvml):
        def nvmlInit(self):
            raise NVMLError("Driver Not Loaded")
    health = HealthRun([], gpu_indices=[0], pynvml=Broken())
    health.begin()
    health.end()
    (gpu,) = health.checks()
    assert gpu["name"] == "gpu: health 0" and gpu["verdict"] == "SKIP" and "Driver Not Loaded" in gpu["detail"]


def test_sampler_thread_samples_until_stopped():
    fake = FakeNvml()
    fake.loaded = True
    sampler = NvmlSampler(fake, [0], interval=0.01)
    assert sampler.start()
    while sampler.gpus[0].samples < 3:  # ends as soon as the thread has sampled: no timing asserted
        pass
    sampler.stop()
    count = sampler.gpus[0].samples
    assert not sampler._thread.is_alive() and sampler.gpus[0].gen_seen == 5
    assert sampler.gpus[0].samples == count
    sampler.close()
    assert fake.shutdown


def test_memory_health_facts():
    fake = FakeNvml(ecc=1, remapped=(4, 1, False, False))
    fake.ecc_before_boot = 2
    facts = gpu_memory_health(fake, 0)
    assert facts["ecc_uncorrected_volatile"] == 1 and facts["ecc_uncorrected_aggregate"] == 3
    assert facts["remapped_rows"] == {"correctable": 4, "uncorrectable": 1, "pending": False, "failure": False}
    assert facts["retired_pages_pending"] is None and facts["unknown"] == []
    assert facts["not_supported"] == ["retired_pages_pending", "retired_pages_sbe", "retired_pages_dbe"]


class UnreadableNvml(FakeNvml):
    """A GPU whose ``broken`` calls fail with an error other than Not Supported."""

    def __init__(self, broken, **kw):
        FakeNvml.__init__(self, **kw)
        self.broken = broken

    def __getattribute__(self, name):
        if name in object.__getattribute__(self, "broken"):
            def fail(*args):
                raise NVMLError("Unknown Error")
            return fail
        return object.__getattribute__(self, name)


def test_hopper_without_retired_pages_passes_from_the_fields_it_has():
    checks, _ = run_health(FakeNvml())
    gpu = checks["gpu: health 0"]
    assert gpu["verdict"] == "PASS" and gpu["actual"] == "healthy"
    assert "not supported on this GPU: retired_pages_pending" in gpu["detail"]


@pytest.mark.parametrize("broken,field", [
    (("nvmlDeviceGetTotalEccErrors",), "ecc_uncorrected_volatile"),
    (("nvmlDeviceGetRemappedRows",), "remapped_rows.pending"),
    (("nvmlDeviceGetRetiredPagesPendingStatus",), "retired_pages_pending"),
    (("nvmlDeviceGetCurrentClocksEventReasons",), "clock events"),
])
def test_a_field_that_could_not_be_read_is_never_pass(broken, field):
    """Not Supported is the GPU's answer (judged from the rest); any other error leaves the
    field unknown: WARN, naming it, never PASS."""
    checks, health = run_health(UnreadableNvml(broken))
    gpu = checks["gpu: health 0"]
    assert gpu["verdict"] == "WARN" and field in gpu["actual"], gpu
    if field != "clock events":
        assert "Unknown Error" in gpu["detail"]


# NVMe SMART: nvme-cli's JSON (temperature in Kelvin), or the controller's hwmon in sysfs.
SMART = {"critical_warning": 0, "temperature": 311, "avail_spare": 100, "spare_thresh": 10,
         "percent_used": 3, "endurance_grp_critical_warning_summary": 0, "data_units_read": 123456,
         "media_errors": 0, "num_err_log_entries": 0}


def fake_nvme(tmp_path, by_dev, rc=0):
    """An nvme-cli stand-in: `nvme smart-log /dev/X -o json` prints by_dev[X]."""
    path = tmp_path / "nvme"
    cases = "".join("  /dev/%s) echo '%s';;\n" % (dev, json.dumps(data)) for dev, data in by_dev.items())
    path.write_text('#!/bin/bash\n[ "$1" = smart-log ] && [ "$3 $4" = "-o json" ] || exit 9\n'
                    'case "$2" in\n%s  *) echo "no such device $2" >&2; exit 1;;\nesac\nexit %d\n' % (cases, rc))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def nvme_check(name, cli, sysfs="/nonexistent", thresholds=None):
    health = HealthRun([], sysfs_root=sysfs, nvme_devices=[name], nvme_cli=cli, thresholds=thresholds)
    health.begin()
    health.end()
    (check,) = health.checks()
    assert check["name"] == "nvme: health %s" % name
    return check


def test_nvme_smart_log_healthy_and_failing(tmp_path):
    cli = fake_nvme(tmp_path, {
        "nvme0": SMART,
        "nvme1": dict(SMART, critical_warning=4),
        "nvme2": dict(SMART, media_errors="3"),                          # 128-bit counters print as strings
        "nvme3": dict({k: v for k, v in SMART.items() if k != "percent_used"}, percentage_used=97),
        "nvme4": dict(SMART, critical_warning={"value": 8, "ro": 1}),    # --verbose's object
        "nvme5": dict(SMART, temperature=353),
    })
    healthy = nvme_check("nvme0", cli)
    assert healthy["verdict"] == "PASS" and "temperature_c 38" in healthy["actual"]
    warning = nvme_check("nvme1", cli)
    assert warning["verdict"] == "FAIL" and "reliability degraded" in warning["actual"]
    media = nvme_check("nvme2", cli)
    assert media["verdict"] == "FAIL" and "media_errors 3" in media["actual"]
    worn = nvme_check("nvme3", cli)
    assert worn["verdict"] == "FAIL" and "percentage_used 97%" in worn["actual"]
    assert nvme_check("nvme4", cli)["verdict"] == "FAIL"
    hot = nvme_check("nvme5", cli)
    assert hot["verdict"] == "WARN" and "temperature 80 C > 70 C" in hot["actual"]
    assert nvme_check("nvme5", cli, thresholds={"nvme_temperature_max_c": 85})["verdict"] == "PASS"


@pytest.mark.parametrize("field,value", [
    ("critical_warning", None), ("critical_warning", float("nan")), ("critical_warning", 2.5),
    ("media_errors", None), ("percentage_used", float("nan")), ("percentage_used", -3),
    ("temperature_c", float("nan")), ("temperature_c", -1.0), ("temperature_c", "unknown"),
])
def test_nvme_smart_field_unknown_is_never_pass(field, value):
    """One SMART field that could not be read, or reads as no figure, keeps the drive's health
    from PASS (WARN naming it); a finding in the fields read still FAILs."""
    from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import nvme_health_check
    good = {"source": "nvme-cli", "critical_warning": 0, "media_errors": 0, "percentage_used": 3,
            "temperature_c": 41.0, "problem": None}
    th = health_thresholds({})
    assert nvme_health_check("nvme0", good, good, th)["verdict"] == "PASS"
    check = nvme_health_check("nvme0", good, dict(good, **{field: value}), th)
    assert check["verdict"] == "WARN" and "not read: %s" % field in check["actual"], check
    worn = dict(good, **{field: value})
    worn["media_errors" if field != "media_errors" else "critical_warning"] = 4
    assert nvme_health_check("nvme0", good, worn, th)["verdict"] == "FAIL"


def test_nvme_cli_error_is_unknown_not_a_traceback(tmp_path):
    cli = fake_nvme(tmp_path, {"nvme0": SMART})
    check = nvme_check("nvme7", cli)
    assert check["verdict"] == "SKIP" and "no such device /dev/nvme7" in check["detail"]
    bad = tmp_path / "badnvme"
    bad.write_text("#!/bin/sh\necho '{not json'\n")
    bad.chmod(0o755)
    assert "bad JSON" in nvme_smart("nvme0", cli=str(bad))["problem"]


def test_nvme_without_cli_reads_the_hwmon_temperature(tmp_path):
    sysfs = tmp_path / "sys"
    hwmon = sysfs / "class" / "nvme" / "nvme0" / "hwmon3"   # the controller's hwmon (kernel >= 5.12)
    hwmon.mkdir(parents=True)
    (hwmon / "temp1_input").write_text("41850\n")
    older = sysfs / "class" / "nvme" / "nvme1" / "device" / "hwmon" / "hwmon1"  # under the PCI device
    older.mkdir(parents=True)
    (older / "temp1_input").write_text("75000\n")
    check = nvme_check("nvme0", str(tmp_path / "absent-nvme"), sysfs=str(sysfs))
    # only the temperature read: the warnings, errors and wear are unknown, so no PASS
    assert check["verdict"] == "WARN" and "41.85" in check["actual"]
    assert "not read: critical_warning, media_errors, percentage_used" in check["actual"]
    assert "not installed" in check["detail"]
    assert nvme_check("nvme1", "", sysfs=str(sysfs))["verdict"] == "WARN"
    assert nvme_check("nvme2", "", sysfs=str(sysfs))["verdict"] == "SKIP"


@pytest.mark.parametrize("given,word", [
    ({"aer_correctable_limit": "ten"}, "aer_correctable_limit"),
    ({"gpu_throttle_fail": "hw_thermal"}, "gpu_throttle_fail"),
    ({"gpu_throttle_warn": ["too_hot"]}, "too_hot"),
    ({"gpu_remapped_rows_pending": "yes"}, "gpu_remapped_rows_pending"),
    ({"nvme_temprature_max_c": 70}, "nvme_temprature_max_c"),
])
def test_bad_thresholds_name_the_key(given, word):
    with pytest.raises(HealthConfigError) as err:
        health_thresholds(given)
    assert word in str(err.value)


def test_profile_values_override_defaults():
    th = health_thresholds({"nvme_temperature_max_c": 75})
    assert th["nvme_temperature_max_c"] == 75 and th["gpu_throttle_fail"] == ["hw_thermal", "hw_power_brake"]
