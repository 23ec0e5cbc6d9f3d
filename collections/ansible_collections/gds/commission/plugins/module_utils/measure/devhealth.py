# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device health around a benchmark run: NVML sampling of the GPUs' PCIe links and clock event
reasons while the jobs run (and of every GPU's PCIe traffic, for measure/watch.py), GPU memory health (ECC, retired pages, remapped rows), NVMe SMART
health (nvme-cli's smart-log, else sysfs), and PCIe AER counters before and after.

Everything here only reads. An NVML call a GPU does not support (NVMLError_NotSupported, as
retired pages on Hopper) or any other NVML error makes that value unknown: never a failure.
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import threading
import time

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check, non_negative_number, profile_thresholds
from ansible_collections.gds.commission.plugins.module_utils.core.proc import run as proc_run
from ansible_collections.gds.commission.plugins.module_utils.core.files import decode, read_text
from ansible_collections.gds.commission.plugins.module_utils.hw.health import aer_checks, link_checks, read_aer
from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import nvml_value, why as _why
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import link_bytes_per_s, normalize_bdf, speed_of_gen
from ansible_collections.gds.commission.plugins.module_utils.measure.pcie_traffic import COUNTER_TICK, COUNTERS, GPM, GPM_REFRESH, GpuTraffic

# nvmlClocksEventReason* bits (nvml.h); the names are what profiles list
CLOCK_EVENT_REASONS = (
    (0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal"), (0x40, "hw_thermal"),
    (0x80, "hw_power_brake"), (0x100, "display_clock_setting"),
)
REASON_NAMES = tuple(name for dummy, name in CLOCK_EVENT_REASONS)

DEFAULT_THRESHOLDS = {
    "aer_correctable_limit": 0,
    "nvme_percentage_used_max": 90,
    "nvme_temperature_max_c": 70,
    "gpu_throttle_fail": ["hw_thermal", "hw_power_brake"],
    "gpu_throttle_warn": ["sw_thermal", "hw_slowdown"],
    "gpu_remapped_rows_pending": True,
}

# NVMe critical warning bits (NVMe base specification, SMART / Health log byte 0)
CRITICAL_WARNING_BITS = (
    (0x1, "spare below threshold"), (0x2, "temperature threshold"), (0x4, "reliability degraded"),
    (0x8, "media read-only"), (0x10, "volatile memory backup failed"), (0x20, "persistent memory read-only"),
)
KELVIN = 273


class HealthConfigError(ValueError):
    """A health threshold has the wrong type or an unknown name."""


def health_thresholds(given):
    """The profile's thresholds over the defaults; HealthConfigError names the bad key."""
    def why(key, value):
        if key.startswith("gpu_throttle_"):
            ok = isinstance(value, list) and all(v in REASON_NAMES for v in value)
            return None if ok else "a list of %s" % ", ".join(REASON_NAMES)
        if key == "gpu_remapped_rows_pending":
            return None if isinstance(value, bool) else "true or false"
        return None if non_negative_number(value) else "a non-negative number"
    return profile_thresholds(given, DEFAULT_THRESHOLDS, "health", HealthConfigError, why)


def reason_names(mask):
    return [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]


# --------------------------------------------------------------------------------------------
# NVML
# --------------------------------------------------------------------------------------------
def import_pynvml():
    """(pynvml, None) or (None, why it cannot be used)."""
    try:
        import pynvml
    except ImportError:
        return None, "python module pynvml (package nvidia-ml-py) is not installed"
    return pynvml, None


CURR_GEN = ("nvmlDeviceGetCurrPcieLinkGeneration",)
CURR_WIDTH = ("nvmlDeviceGetCurrPcieLinkWidth",)
MAX_GEN = ("nvmlDeviceGetMaxPcieLinkGeneration",)
MAX_WIDTH = ("nvmlDeviceGetMaxPcieLinkWidth",)
GPU_MAX_GEN = ("nvmlDeviceGetGpuMaxPcieLinkGeneration",)
GPU_MAX_WIDTH = ("nvmlDeviceGetGpuMaxPcieLinkWidth",)
CLOCK_EVENTS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")


class GpuSample(object):
    """What the sampler saw on one GPU."""

    def __init__(self, index, handle, bdf):
        self.index, self.handle, self.bdf = index, handle, bdf
        self.max_gen = self.max_width = self.gpu_max_gen = self.gpu_max_width = None
        self.gen_seen = self.width_seen = None
        self.first_gen = self.first_width = None
        self.samples = 0
        self.reasons = 0
        self.reason_samples = 0
        self.unknown = []
        self.link = True      # a GPU the jobs use: its link and health are judged
        self.traffic = None   # GpuTraffic: its PCIe bytes (every GPU, when asked)

    def link_rate(self):
        """The fastest the GPU's PCIe link can carry a direction (bytes a second), from NVML's
        maximum generation and width of the link and of the GPU; None when NVML does not say."""
        rates = [link_bytes_per_s(speed_of_gen(self.max_gen), self.max_width),
                 link_bytes_per_s(speed_of_gen(self.gpu_max_gen), self.gpu_max_width)]
        return max((r for r in rates if r), default=None)

    def load(self):
        return {"max_gen_seen": self.gen_seen, "max_width_seen": self.width_seen,
                "max_gen": self.max_gen, "max_width": self.max_width, "samples": self.samples,
                "gpu_max_gen": self.gpu_max_gen, "gpu_max_width": self.gpu_max_width,
                "first_gen": self.first_gen, "first_width": self.first_width, "index": self.index}


class NvmlSampler(object):
    """Samples each GPU's current PCIe generation/width and clock event reasons every
    ``interval`` seconds in a thread while the benchmark runs; keeps the maxima and the union of
    the reasons. With ``traffic`` it also follows the PCIe bytes of every GPU of the node (not
    only those the jobs use: a bounce GPU is another one), read per job through ``mark``: GPM
    samples in the same thread, or byte counters in a thread of their own (pcie_traffic.py).
    NVML stays initialised from ``start`` to ``close``."""

    def __init__(self, pynvml, indices, interval=0.5, traffic=False):
        self.pynvml, self.indices, self.interval = pynvml, sorted(set(indices)), interval
        self.traffic = traffic
        self.traffic_problem = None
        self.gpus = []
        self.problem = None
        self._stop = threading.Event()
        self._thread = None
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._counter_thread = None
        self._init = False

    def start(self):
        try:
            self.pynvml.nvmlInit()
            self._init = True
        except Exception as exc:
            self.problem = "nvmlInit failed: %s" % _why(exc)
            return False
        everyone = []
        if self.traffic:
            count, why = nvml_value(self.pynvml, ("nvmlDeviceGetCount",))
            if count is None:
                self.traffic_problem = why
            else:
                everyone = list(range(int(count)))
        for index in sorted(set(self.indices) | set(everyone)):
            handle, why = nvml_value(self.pynvml, ("nvmlDeviceGetHandleByIndex",), index)
            if why:
                if index in self.indices:
                    self.problem = "GPU %d: %s" % (index, why)
                continue
            pci, why = nvml_value(self.pynvml, ("nvmlDeviceGetPciInfo",), handle)
            bdf = normalize_bdf(decode(pci.busId) if isinstance(pci.busId, bytes) else str(pci.busId)) if pci else None
            gpu = GpuSample(index, handle, bdf)
            gpu.link = index in self.indices
            for attr, names in (("max_gen", MAX_GEN), ("max_width", MAX_WIDTH),
                                ("gpu_max_gen", GPU_MAX_GEN), ("gpu_max_width", GPU_MAX_WIDTH)):
                value, why = nvml_value(self.pynvml, names, handle)
                setattr(gpu, attr, int(value) if value is not None else None)
                if why and gpu.link and attr in ("max_gen", "max_width"):
                    gpu.unknown.append(why)
            if self.traffic:
                gpu.traffic = GpuTraffic(self.pynvml, handle, gpu.link_rate(), time.monotonic)
            self.gpus.append(gpu)
        self.sample()  # the idle state before the first job
        self._thread = threading.Thread(target=self._run, name="nvml-sampler")
        self._thread.daemon = True
        self._thread.start()
        counting = [g for g in self.gpus if g.traffic is not None and g.traffic.source == COUNTERS]
        if counting:
            self._counter_thread = threading.Thread(target=self._count, args=(counting,), name="nvml-counters")
            self._counter_thread.daemon = True
            self._counter_thread.start()
        return True

    def _run(self):
        while not self._stop.wait(self.interval):
            self.sample()

    def _count(self, counting):
        """The PCIe byte counters of ``counting`` every COUNTER_TICK: they wrap at 32 bits
        (pcie_traffic.py), so a thread of their own, never held up by the link queries."""
        while not self._stop.wait(COUNTER_TICK):
            self.count(counting)

    def count(self, gpus=None):
        """One read of the PCIe byte counters (of ``gpus``, default every GPU that has them)."""
        with self._count_lock:
            for gpu in gpus if gpus is not None else self.gpus:
                if gpu.traffic is not None and gpu.traffic.source == COUNTERS:
                    gpu.traffic.read_counters(time.monotonic())

    def sample(self):
        with self._lock:
            now = time.monotonic()
            for gpu in self.gpus:
                if gpu.traffic is not None:
                    gpu.traffic.sample(now)
                if not gpu.link:
                    continue
                gen, why_gen = nvml_value(self.pynvml, CURR_GEN, gpu.handle)
                width, why_width = nvml_value(self.pynvml, CURR_WIDTH, gpu.handle)
                if gen is not None and width is not None:
                    gen, width = int(gen), int(width)
                    if gpu.samples == 0:
                        gpu.first_gen, gpu.first_width = gen, width
                    gpu.samples += 1
                    gpu.gen_seen = max(gpu.gen_seen or 0, gen)
                    gpu.width_seen = max(gpu.width_seen or 0, width)
                elif (why_gen or why_width) not in gpu.unknown:
                    gpu.unknown.append(why_gen or why_width)
                mask, why = nvml_value(self.pynvml, CLOCK_EVENTS, gpu.handle)
                if mask is not None:
                    gpu.reasons |= int(mask)
                    gpu.reason_samples += 1
                elif why not in gpu.unknown:
                    gpu.unknown.append(why)

    def mark(self):
        """{index: {bdf, totals: [rx, tx] bytes so far or None, source, problem}} of every GPU
        whose traffic is followed: one job's traffic is the difference of two marks."""
        if any(g.traffic is not None and g.traffic.source == GPM for g in self.gpus):
            time.sleep(GPM_REFRESH)  # GPM's counters catch up with the job that just ended
        with self._lock, self._count_lock:
            now = time.monotonic()
            out = {}
            for gpu in self.gpus:
                if gpu.traffic is not None:
                    totals = gpu.traffic.totals(now)
                    out[gpu.index] = {"bdf": gpu.bdf, "totals": totals, "source": gpu.traffic.source,
                                      "problem": gpu.traffic.problem, "late": gpu.traffic.late,
                                      "worst_gap": gpu.traffic.worst_gap, "safe_gap": gpu.traffic.safe_gap}
            return out

    def stop(self):
        """Stop sampling (NVML stays up for the health reads; ``close`` shuts it down)."""
        self._stop.set()
        for thread in (self._thread, self._counter_thread):
            if thread is not None:
                thread.join(max(5.0, 4 * self.interval))

    def close(self):
        if self._init:
            for gpu in self.gpus:
                if gpu.traffic is not None:
                    gpu.traffic.close()
            try:
                self.pynvml.nvmlShutdown()
            except Exception:
                pass
            self._init = False

    def gpu_load(self):
        """{bdf: {max_gen_seen, max_width_seen, max_gen, max_width, samples, ...}} for the GPUs
        with at least one link sample."""
        return {g.bdf: g.load() for g in self.gpus if g.link and g.samples and g.bdf}


def gpu_memory_health(pynvml, handle):
    """ECC, retired pages and remapped rows of one GPU; None (with the reason in ``unknown``)
    for what the GPU does not report."""
    facts, unknown = {}, []

    def get(key, names, *args):
        value, why = nvml_value(pynvml, names, handle, *args)
        facts[key] = value
        if why:
            unknown.append("%s: %s" % (key, why.split(": ", 1)[-1]))
        return value

    unc = getattr(pynvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    get("ecc_uncorrected_volatile", ("nvmlDeviceGetTotalEccErrors",), unc, getattr(pynvml, "NVML_VOLATILE_ECC", 0))
    get("ecc_uncorrected_aggregate", ("nvmlDeviceGetTotalEccErrors",), unc, getattr(pynvml, "NVML_AGGREGATE_ECC", 1))
    pending = get("retired_pages_pending", ("nvmlDeviceGetRetiredPagesPendingStatus",))
    if pending is not None:
        facts["retired_pages_pending"] = bool(int(pending))
    for key, cause in (("retired_pages_sbe", "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS"),
                       ("retired_pages_dbe", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR")):
        pages = get(key, ("nvmlDeviceGetRetiredPages",), getattr(pynvml, cause, 0 if key.endswith("sbe") else 1))
        if pages is not None:
            facts[key] = len(pages)
    rows = get("remapped_rows", ("nvmlDeviceGetRemappedRows",))
    if rows is not None:
        corr, unc_rows, is_pending, failure = (list(rows) + [None] * 4)[:4]
        facts["remapped_rows"] = {"correctable": corr, "uncorrectable": unc_rows,
                                  "pending": bool(is_pending), "failure": bool(failure)}
    for key in ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate"):
        if facts[key] is not None:
            facts[key] = int(facts[key])
    facts["unknown"] = unknown
    return facts


def gpu_health_check(index, facts, reasons, reason_samples, th):
    """``gpu: health <index>`` from the memory facts and the clock event reasons seen during the run."""
    name = "gpu: health %d" % index
    if facts is None:
        return check(name, "SKIP", "healthy", "unknown", "not read: %s" % (reasons or "NVML unavailable"))
    fails, warns, seen = [], [], []
    if facts.get("ecc_uncorrected_volatile"):
        fails.append("%d uncorrectable ECC errors since the driver loaded" % facts["ecc_uncorrected_volatile"])
    if facts.get("ecc_uncorrected_aggregate"):
        warns.append("%d uncorrectable ECC errors over the GPU's life" % facts["ecc_uncorrected_aggregate"])
    if facts.get("retired_pages_pending"):
        (fails if th["gpu_remapped_rows_pending"] else warns).append(
            "retired pages pending (take effect after a GPU reset)")
    rows = facts.get("remapped_rows")
    if rows:
        if rows["failure"]:
            fails.append("row remapping failed")
        if rows["pending"]:
            (fails if th["gpu_remapped_rows_pending"] else warns).append(
                "remapped rows pending (take effect after a GPU reset)")
        if rows["uncorrectable"]:
            seen.append("%d rows remapped for uncorrectable errors" % rows["uncorrectable"])
    names = reason_names(reasons or 0)
    for reason in names:
        if reason in th["gpu_throttle_fail"]:
            fails.append("clock event %s during the run" % reason)
        elif reason in th["gpu_throttle_warn"]:
            warns.append("clock event %s during the run" % reason)
    known = [k for k in ("ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows")
             if facts.get(k) is not None] + (["clock events"] if reason_samples else [])
    unknown = list(facts.get("unknown") or [])
    if not reason_samples:
        unknown.append("clock event reasons: not sampled")
    notes = seen + (["clock events seen: %s" % ", ".join(names)] if names else []) + \
        (["unknown: %s" % "; ".join(unknown)] if unknown else [])
    if fails:
        verdict, actual = "FAIL", "; ".join(fails + warns)
    elif warns:
        verdict, actual = "WARN", "; ".join(warns)
    elif known:
        verdict, actual = "PASS", "healthy"
    else:
        verdict, actual = "SKIP", "unknown"
    judged = th["gpu_throttle_fail"] + th["gpu_throttle_warn"]
    expected = "no uncorrectable ECC errors, nothing pending" + (", no %s" % "/".join(judged) if judged else "")
    return check(name, verdict, expected, actual, "; ".join(notes) or None)


# --------------------------------------------------------------------------------------------
# NVMe
# --------------------------------------------------------------------------------------------
def _number(value):
    """nvme-cli prints counters as ints, floats (1.x) or decimal strings (128-bit in 2.x)."""
    if isinstance(value, dict):  # --verbose prints critical_warning as {"value": n, ...}
        value = value.get("value")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(float(value)) if not isinstance(value, int) else value
    except (TypeError, ValueError):
        return None


def find_cli(cli):
    if not cli:
        return None
    if os.sep in cli:
        return cli if os.access(cli, os.X_OK) else None
    return shutil.which(cli) or next((p for p in ("/usr/sbin/" + cli, "/sbin/" + cli) if os.access(p, os.X_OK)), None)


def sysfs_temperature(sysfs_root, name):
    """Composite temperature (degrees C) from the controller's hwmon device, None without one."""
    ctrl = os.path.join(sysfs_root, "class", "nvme", name)
    for pattern in ("hwmon*/temp1_input", "device/hwmon/hwmon*/temp1_input"):
        for path in sorted(glob.glob(os.path.join(ctrl, pattern))):
            text = read_text(path)
            if text is not None and text.strip().lstrip("-").isdigit():
                return int(text.strip()) / 1000.0
    return None


def nvme_smart(name, sysfs_root="/sys", cli="nvme"):
    """SMART health of controller ``name`` (nvme0): {source, critical_warning, media_errors,
    percentage_used, temperature_c, problem}; values nvme-cli or sysfs cannot give are None."""
    out = {"source": None, "critical_warning": None, "media_errors": None, "percentage_used": None,
           "temperature_c": None, "problem": None}
    binary = find_cli(cli)
    if binary:
        cmd = [binary, "smart-log", "/dev/" + name, "-o", "json"]
        proc = proc_run(cmd, 30)
        try:
            if proc.error or proc.timed_out:
                out["problem"] = "%s: %s" % (" ".join(cmd), proc.error or "no answer in 30 s")
            elif proc.rc != 0:
                out["problem"] = "%s exited %d: %s" % (" ".join(cmd), proc.rc, proc.stderr.strip()[-300:])
            else:
                data = json.loads(proc.stdout)
                if not isinstance(data, dict):
                    out["problem"] = "%s printed no JSON object" % " ".join(cmd)
                else:
                    out["source"] = "nvme-cli"
                    out["critical_warning"] = _number(data.get("critical_warning"))
                    out["media_errors"] = _number(data.get("media_errors"))
                    used = data.get("percent_used")  # older nvme-cli: percentage_used
                    out["percentage_used"] = _number(used if used is not None else data.get("percentage_used"))
                    kelvin = _number(data.get("temperature"))
                    out["temperature_c"] = kelvin - KELVIN if kelvin else None
        except ValueError as exc:
            out["problem"] = "%s printed bad JSON: %s" % (" ".join(cmd), exc)
    elif cli:
        out["problem"] = "nvme-cli (%s) is not installed: no SMART data" % cli
    else:
        out["problem"] = "SMART not read (no nvme-cli given)"
    if out["temperature_c"] is None:
        temp = sysfs_temperature(sysfs_root, name)
        if temp is not None:
            out["temperature_c"] = temp
            out["source"] = out["source"] or "sysfs"
    return out


def nvme_health_check(name, before, after, th):
    """``nvme: health <dev>`` from the SMART data read after the run (``before`` gives deltas)."""
    check_name = "nvme: health %s" % name
    fails, warns, notes = [], [], []
    cw = after["critical_warning"]
    if cw:
        bits = [text for bit, text in CRITICAL_WARNING_BITS if cw & bit] or ["0x%x" % cw]
        fails.append("critical_warning 0x%x (%s)" % (cw, ", ".join(bits)))
    media = after["media_errors"]
    if media:
        grew = (before or {}).get("media_errors")
        fails.append("media_errors %d%s" % (media, " (+%d during the run)" % (media - grew) if grew is not None and media > grew else ""))
    used = after["percentage_used"]
    if used is not None and used > th["nvme_percentage_used_max"]:
        fails.append("percentage_used %d%% > %s%%" % (used, th["nvme_percentage_used_max"]))
    temp = after["temperature_c"]
    if temp is not None and temp > th["nvme_temperature_max_c"]:
        warns.append("temperature %g C > %s C" % (temp, th["nvme_temperature_max_c"]))
    missing = [k for k in ("critical_warning", "media_errors", "percentage_used", "temperature_c") if after[k] is None]
    if missing:
        notes.append("unknown: %s%s" % (", ".join(missing), " (%s)" % after["problem"] if after["problem"] else ""))
    facts = ", ".join("%s %s" % (k, after[k]) for k in ("critical_warning", "media_errors", "percentage_used", "temperature_c")
                      if after[k] is not None)
    expected = "critical_warning 0, media_errors 0, percentage_used <= %s, temperature <= %s C" % (
        th["nvme_percentage_used_max"], th["nvme_temperature_max_c"])
    if fails or warns:
        return check(check_name, "FAIL" if fails else "WARN", expected, "; ".join(fails + warns),
                     "; ".join(["/dev/%s from %s" % (name, after["source"])] + notes))
    if len(missing) == 4:
        return check(check_name, "SKIP", expected, "unknown", "; ".join(notes))
    return check(check_name, "PASS", expected, facts, "; ".join(["from %s" % after["source"]] + notes))


# --------------------------------------------------------------------------------------------
# Around the benchmark
# --------------------------------------------------------------------------------------------
class HealthRun(object):
    """Read the counters before the first job, sample the GPUs during the jobs, read again after
    the last, then judge. ``begin``/``end`` never raise."""

    def __init__(self, pcie_links=None, sysfs_root="/sys", nvme_devices=None, nvme_cli="nvme",
                 thresholds=None, gpu_indices=None, interval=0.5, pynvml=None, traffic=False):
        self.links = list(pcie_links or [])
        self.sysfs_root = sysfs_root
        self.nvme_devices = list(nvme_devices or [])
        self.nvme_cli = nvme_cli
        self.th = health_thresholds(thresholds)
        self.gpu_indices = sorted(set(gpu_indices or []))
        self.interval = interval
        self.pynvml = pynvml
        self.traffic = traffic  # follow every GPU's PCIe bytes (measure/watch.py reads them per job)
        self.sampler = None
        self.nvml_problem = None
        self.aer_before = self.aer_after = {}
        self.nvme_before, self.nvme_after = {}, {}
        self.gpu_facts = {}

    def begin(self):
        bdfs = sorted({link["bdf"] for link in self.links if link.get("bdf")})
        self.aer_before = read_aer(self.sysfs_root, bdfs) if bdfs else {}
        self.nvme_before = {n: nvme_smart(n, self.sysfs_root, self.nvme_cli) for n in self.nvme_devices}
        if self.gpu_indices or self.traffic:
            pynvml, why = (self.pynvml, None) if self.pynvml is not None else import_pynvml()
            if pynvml is None:
                self.nvml_problem = why
            else:
                self.sampler = NvmlSampler(pynvml, self.gpu_indices, self.interval, self.traffic)
                try:
                    if not self.sampler.start():
                        self.nvml_problem = self.sampler.problem
                        self.sampler = None
                except Exception as exc:  # a broken pynvml must not stop the benchmark
                    self.nvml_problem = "NVML sampling failed: %s" % exc
                    self.sampler.close()
                    self.sampler = None

    def end(self):
        if self.sampler is not None:
            try:
                self.sampler.stop()
                for gpu in self.sampler.gpus:
                    if gpu.link:
                        self.gpu_facts[gpu.index] = gpu_memory_health(self.sampler.pynvml, gpu.handle)
            except Exception as exc:
                self.nvml_problem = "NVML read failed: %s" % exc
            finally:
                self.sampler.close()
        self.aer_after = read_aer(self.sysfs_root, sorted(self.aer_before)) if self.aer_before else {}
        self.nvme_after = {n: nvme_smart(n, self.sysfs_root, self.nvme_cli) for n in self.nvme_devices}

    def gpu_load(self):
        return self.sampler.gpu_load() if self.sampler is not None else {}

    def traffic_mark(self):
        """(every GPU's PCIe bytes so far, None) for measure/watch.py, or (None, why there are none).
        Never raises: a broken pynvml is an unknown, not a failed benchmark."""
        if self.sampler is None:
            return None, self.nvml_problem or "NVML was not started"
        try:
            marks = self.sampler.mark()
        except Exception as exc:
            return None, "NVML read failed: %s" % exc
        if not marks:
            return None, self.sampler.traffic_problem or self.sampler.problem or "no GPU's traffic is followed"
        return marks, None

    def checks(self):
        out = []
        load = self.gpu_load()
        sampled = [link["bdf"] for link in self.links if link.get("kind") == "gpu" and link.get("bdf") in load]
        if sampled:
            # under load the GPU's width is NVML's widest seen, not what sysfs showed at idle
            links = [dict(link, current_width=load[link["bdf"]]["max_width_seen"])
                     if link.get("bdf") in sampled and load[link["bdf"]]["max_width_seen"] else link
                     for link in self.links]
            for item in link_checks(links, gpu_load=load):
                if item.get("bdf") in sampled:
                    out.append(dict(item, name=item["name"] + " under load", under_load=True))
        if self.aer_before:
            out.extend(aer_checks(self.aer_before, self.aer_after, self.th["aer_correctable_limit"]))
        for name in self.nvme_devices:
            out.append(nvme_health_check(name, self.nvme_before.get(name), self.nvme_after[name], self.th))
        by_index = {g.index: g for g in (self.sampler.gpus if self.sampler is not None else [])}
        for index in self.gpu_indices:
            gpu = by_index.get(index)
            if gpu is None or self.gpu_facts.get(index) is None:
                out.append(gpu_health_check(index, None, self.nvml_problem, 0, self.th))
            else:
                out.append(gpu_health_check(index, self.gpu_facts.get(index), gpu.reasons, gpu.reason_samples, self.th))
        return out

    def facts(self):
        return {
            "gpu_load": self.gpu_load(),
            "gpus": {str(i): dict(f, clock_events=reason_names(self._reasons(i))) for i, f in self.gpu_facts.items()},
            "nvml_problem": self.nvml_problem,
            "nvme": {n: {"before": self.nvme_before.get(n), "after": self.nvme_after.get(n)} for n in self.nvme_devices},
            "aer": {"before": self.aer_before, "after": self.aer_after},
        }

    def _reasons(self, index):
        for gpu in (self.sampler.gpus if self.sampler is not None else []):
            if gpu.index == index:
                return gpu.reasons
        return 0
