# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Device health around a benchmark run: NVML sampling of the GPUs' PCIe links and clock event
reasons while the jobs run (and of every GPU's PCIe traffic, for measure/watch.py), GPU memory health (ECC, retired pages, remapped rows), NVMe SMART
health (nvme-cli's smart-log, else sysfs), and PCIe AER counters before and after.

Everything here only reads. An NVML call a GPU does not support (NVMLError_NotSupported, as
retired pages on Hopper) or any other NVML error makes that value unknown: never a failure. Every
NVML call goes through hw/nvml.py's BoundedNvml: a call that hangs, or NVML too slow to answer
within ``timeout``, makes NVML's figures unknown for the rest of the run, and no wait on the
sampler outlasts ``timeout``.
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
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import BadNumber, figure, whole, whole_figure
from ansible_collections.gds.commission.plugins.module_utils.hw.health import aer_checks, link_checks, read_aer
from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import NOT_SUPPORTED, NVML_TIMEOUT, BoundedNvml, nvml_value, why as _why
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
MAX_GPUS = 1024  # more than any node has: a larger count from NVML is garbage


def nvml_whole(names, value, why, maximum=(1 << 64) - 1):
    """(an NVML integer, None) or (None, why it is unknown): ``value, why`` as nvml_value gave
    them, the value read strictly (a NaN, a negative or a fraction is no count)."""
    if value is None:
        return None, why
    try:
        return whole(value, 0, maximum), None
    except BadNumber as exc:
        return None, "%s: %s" % (names[0], exc)


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
    NVML stays initialised from ``start`` to ``close``; every call waits at most ``timeout``.
    ``traffic_problem`` says which GPUs of the node are not followed (the count failed, a handle
    failed): a job's traffic is then incomplete, whatever the others show."""

    def __init__(self, pynvml, indices, interval=0.5, traffic=False, timeout=NVML_TIMEOUT):
        self.pynvml = pynvml if isinstance(pynvml, BoundedNvml) else BoundedNvml(pynvml, timeout)
        self.indices, self.interval = sorted(set(indices)), interval
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
        with self.pynvml.budget():
            try:
                self.pynvml.nvmlInit()
                self._init = True
            except Exception as exc:
                self.problem = "nvmlInit failed: %s" % _why(exc)
                return False
        with self.pynvml.budget():
            self._open()
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

    def _open(self):
        everyone, lost = [], []
        if self.traffic:
            count, why = nvml_whole(("nvmlDeviceGetCount",), *nvml_value(self.pynvml, ("nvmlDeviceGetCount",)),
                                    maximum=MAX_GPUS)
            if count is None:
                lost.append("the node's GPUs are not all known (%s)" % why)
            else:
                everyone = list(range(count))
        for index in sorted(set(self.indices) | set(everyone)):
            handle, why = nvml_value(self.pynvml, ("nvmlDeviceGetHandleByIndex",), index)
            if why:
                if index in self.indices:
                    self.problem = "GPU %d: %s" % (index, why)
                lost.append("GPU %d: %s" % (index, why))
                continue
            pci, why = nvml_value(self.pynvml, ("nvmlDeviceGetPciInfo",), handle)
            bus = getattr(pci, "busId", None)
            bdf = normalize_bdf(decode(bus) if isinstance(bus, bytes) else str(bus)) if bus is not None else None
            gpu = GpuSample(index, handle, bdf)
            gpu.link = index in self.indices
            for attr, names in (("max_gen", MAX_GEN), ("max_width", MAX_WIDTH),
                                ("gpu_max_gen", GPU_MAX_GEN), ("gpu_max_width", GPU_MAX_WIDTH)):
                value, why = nvml_whole(names, *nvml_value(self.pynvml, names, handle), maximum=64)
                setattr(gpu, attr, value)
                if why and gpu.link and attr in ("max_gen", "max_width"):
                    gpu.unknown.append(why)
            if self.traffic:
                gpu.traffic = GpuTraffic(self.pynvml, handle, gpu.link_rate(), time.monotonic)
            self.gpus.append(gpu)
        if self.traffic and lost:
            followed = [g.index for g in self.gpus if g.traffic is not None]
            self.traffic_problem = "%s: only GPU %s followed" % (
                "; ".join(lost), ", ".join(str(i) for i in followed) if followed else "none")

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
        with self._count_lock, self.pynvml.budget():
            for gpu in gpus if gpus is not None else self.gpus:
                if gpu.traffic is not None and gpu.traffic.source == COUNTERS:
                    gpu.traffic.read_counters(time.monotonic())

    def sample(self):
        with self._lock, self.pynvml.budget():
            now = time.monotonic()
            for gpu in self.gpus:
                if gpu.traffic is not None:
                    gpu.traffic.sample(now)
                if not gpu.link:
                    continue
                gen, why_gen = nvml_whole(CURR_GEN, *nvml_value(self.pynvml, CURR_GEN, gpu.handle), maximum=64)
                width, why_width = nvml_whole(CURR_WIDTH, *nvml_value(self.pynvml, CURR_WIDTH, gpu.handle), maximum=64)
                if gen is not None and width is not None:
                    if gpu.samples == 0:
                        gpu.first_gen, gpu.first_width = gen, width
                    gpu.samples += 1
                    gpu.gen_seen = max(gpu.gen_seen or 0, gen)
                    gpu.width_seen = max(gpu.width_seen or 0, width)
                elif (why_gen or why_width) not in gpu.unknown:
                    gpu.unknown.append(why_gen or why_width)
                mask, why = nvml_whole(CLOCK_EVENTS, *nvml_value(self.pynvml, CLOCK_EVENTS, gpu.handle))
                if mask is not None:
                    gpu.reasons |= mask
                    gpu.reason_samples += 1
                elif why not in gpu.unknown:
                    gpu.unknown.append(why)

    def mark(self):
        """{index: {bdf, totals: [rx, tx] bytes so far or None, source, problem, ...}} of every
        GPU whose traffic is followed: one job's traffic is the difference of two marks. Waits at
        most the NVML timeout for the sampler's threads; past it NVML is hung."""
        followed = [g for g in self.gpus if g.traffic is not None]
        if any(g.traffic.source == GPM for g in followed) and self.pynvml.hung is None:
            time.sleep(GPM_REFRESH)  # GPM's counters catch up with the job that just ended
        with self.pynvml.budget():
            locks = []
            for lock in (self._lock, self._count_lock):
                if not lock.acquire(timeout=max(0.0, self.pynvml.left())):
                    self.pynvml.mark_hung("NVML hung: the sampler's NVML calls did not end within %g s"
                                          % self.pynvml.timeout)
                    break
                locks.append(lock)
            try:
                now = time.monotonic()
                out = {}
                for gpu in followed:
                    # after a hang nothing is read: the totals are unknown, the reason is the hang
                    totals = gpu.traffic.totals(now) if len(locks) == 2 else None
                    out[gpu.index] = dict(gpu.traffic.state(), bdf=gpu.bdf, totals=totals,
                                          problem=self.pynvml.hung if totals is None and len(locks) < 2
                                          else gpu.traffic.problem)
                return out
            finally:
                for lock in locks:
                    lock.release()

    def stop(self):
        """Stop sampling (NVML stays up for the health reads; ``close`` shuts it down). A thread
        still in an NVML call after the timeout is left behind, and NVML is hung."""
        self._stop.set()
        for thread in (self._thread, self._counter_thread):
            if thread is not None:
                thread.join(self.pynvml.timeout + 4 * self.interval)
                if thread.is_alive():
                    self.pynvml.mark_hung("NVML hung: the %s thread did not stop within %g s"
                                          % (thread.name, self.pynvml.timeout + 4 * self.interval))

    def close(self):
        if self._init:
            with self.pynvml.budget():
                for gpu in self.gpus:
                    if gpu.traffic is not None:
                        gpu.traffic.close()
                if self.pynvml.hung is None:  # a call still inside the driver: leave NVML to it
                    try:
                        self.pynvml.nvmlShutdown()
                    except Exception:
                        pass
            self._init = False
        self.pynvml.close()

    def gpu_load(self):
        """{bdf: {max_gen_seen, max_width_seen, max_gen, max_width, samples, ...}} for the GPUs
        with at least one link sample."""
        return {g.bdf: g.load() for g in self.gpus if g.link and g.samples and g.bdf}


def gpu_memory_health(pynvml, handle):
    """ECC, retired pages and remapped rows of one GPU; None for what NVML did not give: its key
    in ``not_supported`` where NVML says this GPU does not support it (retired pages on Ampere and
    Hopper, which remap rows instead), else in ``unknown`` with the reason."""
    facts, unknown, unsupported = {}, [], []

    def get(key, names, *args, **kind):
        value, why = nvml_value(pynvml, names, handle, *args)
        try:  # NVML's numbers read strictly: a NaN or a negative count is unknown, not a fact
            if value is not None and kind.get("pages"):
                value = len(list(value))
            elif value is not None and kind.get("rows"):
                value = [whole(int(v) if isinstance(v, bool) else v) for v in (list(value) + [0] * 4)[:4]]
            elif value is not None:
                value = whole(int(value) if isinstance(value, bool) else value)
        except (BadNumber, TypeError) as exc:
            value, why = None, "%s: %s" % (names[0], exc)
        facts[key] = value
        if why and why.split(": ", 1)[-1] == NOT_SUPPORTED:
            unsupported.append(key)
        elif why:
            unknown.append("%s: %s" % (key, why.split(": ", 1)[-1]))
        return value

    unc = getattr(pynvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    get("ecc_uncorrected_volatile", ("nvmlDeviceGetTotalEccErrors",), unc, getattr(pynvml, "NVML_VOLATILE_ECC", 0))
    get("ecc_uncorrected_aggregate", ("nvmlDeviceGetTotalEccErrors",), unc, getattr(pynvml, "NVML_AGGREGATE_ECC", 1))
    pending = get("retired_pages_pending", ("nvmlDeviceGetRetiredPagesPendingStatus",))
    if pending is not None:
        facts["retired_pages_pending"] = bool(pending)
    for key, cause in (("retired_pages_sbe", "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS"),
                       ("retired_pages_dbe", "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR")):
        get(key, ("nvmlDeviceGetRetiredPages",), getattr(pynvml, cause, 0 if key.endswith("sbe") else 1), pages=True)
    rows = get("remapped_rows", ("nvmlDeviceGetRemappedRows",), rows=True)
    if rows is not None:
        corr, unc_rows, is_pending, failure = rows
        facts["remapped_rows"] = {"correctable": corr, "uncorrectable": unc_rows,
                                  "pending": bool(is_pending), "failure": bool(failure)}
    facts["unknown"], facts["not_supported"] = unknown, unsupported
    return facts


def _flag(value):
    """A yes/no fact as read (a bool), else None: unknown."""
    return value if isinstance(value, bool) else None


def gpu_health_check(index, facts, reasons, reason_samples, th):
    """``gpu: health <index>`` from the memory facts (gpu_memory_health) and the clock event
    reasons seen during the run (``reasons``, their union over ``reason_samples`` samples).

    Each judged field is read, or not supported by this GPU (``not_supported``: judged from the
    fields it has, and said so), or unknown: a field that should be there and could not be read
    (None, a missing key, no count or flag) keeps the check from PASS (WARN; SKIP when nothing
    was read). A finding of what was read FAILs or WARNs whatever else is unknown."""
    name = "gpu: health %d" % index
    if not isinstance(facts, dict):
        return check(name, "SKIP", "healthy", "unknown", "not read: %s" % (reasons or "NVML unavailable"))
    unsupported = [k for k in facts.get("not_supported") or [] if isinstance(k, str)]
    rows = facts.get("remapped_rows")
    rows = rows if isinstance(rows, dict) else {}
    raw = {key: facts.get(key) for key in ("ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "retired_pages_pending")}
    raw.update(("remapped_rows." + key, rows.get(key)) for key in ("failure", "pending"))
    # what is judged, as read (None: unknown); a field this GPU does not support is not judged
    judged = {key: (whole_figure if key.startswith("ecc") else _flag)(value) for key, value in raw.items()
              if key.split(".")[0] not in unsupported}
    samples = whole_figure(reason_samples)
    mask = whole_figure(reasons)
    judged["clock events"] = None if not samples or mask is None else mask
    fails, warns, seen = [], [], []
    if judged.get("ecc_uncorrected_volatile"):
        fails.append("%d uncorrectable ECC errors since the driver loaded" % judged["ecc_uncorrected_volatile"])
    if judged.get("ecc_uncorrected_aggregate"):
        warns.append("%d uncorrectable ECC errors over the GPU's life" % judged["ecc_uncorrected_aggregate"])
    pending = fails if th["gpu_remapped_rows_pending"] else warns
    if judged.get("retired_pages_pending"):
        pending.append("retired pages pending (take effect after a GPU reset)")
    if judged.get("remapped_rows.failure"):
        fails.append("row remapping failed")
    if judged.get("remapped_rows.pending"):
        pending.append("remapped rows pending (take effect after a GPU reset)")
    if whole_figure(rows.get("uncorrectable")):
        seen.append("%d rows remapped for uncorrectable errors" % rows["uncorrectable"])
    names = reason_names(judged["clock events"] or 0)
    for reason in names:
        if reason in th["gpu_throttle_fail"]:
            fails.append("clock event %s during the run" % reason)
        elif reason in th["gpu_throttle_warn"]:
            warns.append("clock event %s during the run" % reason)
    unread = [k for k, v in judged.items() if v is None]
    unknown = [str(u) for u in facts.get("unknown") or []]
    unknown += ["%s %r" % (key, raw[key]) for key in unread if raw.get(key) is not None]
    if "clock events" in unread:
        unknown.append("clock event reasons: %s" % ("not sampled" if samples == 0 else "%r samples, mask %r"
                                                    % (reason_samples, reasons)))
    notes = seen + (["clock events seen: %s" % ", ".join(names)] if names else []) + \
        (["not supported on this GPU: %s" % ", ".join(unsupported)] if unsupported else []) + \
        (["unknown: %s" % "; ".join(unknown)] if unknown else [])
    if fails:
        verdict, actual = "FAIL", "; ".join(fails + warns)
    elif warns:
        verdict, actual = "WARN", "; ".join(warns)
    elif len(unread) == len(judged):
        verdict, actual = "SKIP", "unknown"
    elif unread:
        verdict, actual = "WARN", "nothing wrong in what was read; not read: %s" % ", ".join(unread)
    else:
        verdict, actual = "PASS", "healthy"
    judged_reasons = th["gpu_throttle_fail"] + th["gpu_throttle_warn"]
    expected = "no uncorrectable ECC errors, nothing pending" + (
        ", no %s" % "/".join(judged_reasons) if judged_reasons else "")
    return check(name, verdict, expected, actual, "; ".join(notes) or None, inputs=judged)


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


SMART_FIELDS = ("critical_warning", "media_errors", "percentage_used", "temperature_c")


def _smart(values):
    """The judged SMART fields as read: counts and a bit mask whole numbers >= 0, the wear and the
    temperature figures >= 0 (a drive at work is above 0 C); None for what is unknown."""
    values = values if isinstance(values, dict) else {}
    return {key: (whole_figure if key in ("critical_warning", "media_errors") else figure)(values.get(key))
            for key in SMART_FIELDS}


def nvme_health_check(name, before, after, th):
    """``nvme: health <dev>`` from the SMART data read after the run (``before`` gives deltas).
    A field that could not be read (nvme-cli missing or failing, a value that is no figure) keeps
    the check from PASS: WARN, SKIP when none was read; a finding FAILs or WARNs whatever else is
    unknown."""
    check_name = "nvme: health %s" % name
    after = after if isinstance(after, dict) else {}
    read = _smart(after)
    fails, warns, notes = [], [], []
    cw = read["critical_warning"]
    if cw:
        bits = [text for bit, text in CRITICAL_WARNING_BITS if cw & bit] or ["0x%x" % cw]
        fails.append("critical_warning 0x%x (%s)" % (cw, ", ".join(bits)))
    media = read["media_errors"]
    if media:
        grew = _smart(before)["media_errors"]
        fails.append("media_errors %d%s" % (media, " (+%d during the run)" % (media - grew) if grew is not None and media > grew else ""))
    used = read["percentage_used"]
    if used is not None and used > th["nvme_percentage_used_max"]:
        fails.append("percentage_used %d%% > %s%%" % (used, th["nvme_percentage_used_max"]))
    temp = read["temperature_c"]
    if temp is not None and temp > th["nvme_temperature_max_c"]:
        warns.append("temperature %g C > %s C" % (temp, th["nvme_temperature_max_c"]))
    missing = [k for k in SMART_FIELDS if read[k] is None]
    if missing:
        shown = ["%s %r" % (k, after[k]) if after.get(k) is not None else k for k in missing]
        notes.append("unknown: %s%s" % (", ".join(shown), " (%s)" % after["problem"] if after.get("problem") else ""))
    facts = ", ".join("%s %s" % (k, read[k]) for k in SMART_FIELDS if read[k] is not None)
    expected = "critical_warning 0, media_errors 0, percentage_used <= %s, temperature <= %s C" % (
        th["nvme_percentage_used_max"], th["nvme_temperature_max_c"])
    source = "from %s" % after.get("source")
    if fails or warns:
        return check(check_name, "FAIL" if fails else "WARN", expected, "; ".join(fails + warns),
                     "; ".join(["/dev/%s %s" % (name, source)] + notes))
    if len(missing) == len(SMART_FIELDS):
        return check(check_name, "SKIP", expected, "unknown", "; ".join(notes))
    if missing:
        return check(check_name, "WARN", expected, "%s; not read: %s" % (facts, ", ".join(missing)),
                     "; ".join([source] + notes))
    return check(check_name, "PASS", expected, facts, source, inputs=read)


# --------------------------------------------------------------------------------------------
# Around the benchmark
# --------------------------------------------------------------------------------------------
class HealthRun(object):
    """Read the counters before the first job, sample the GPUs during the jobs, read again after
    the last, then judge. ``begin``/``end`` never raise."""

    def __init__(self, pcie_links=None, sysfs_root="/sys", nvme_devices=None, nvme_cli="nvme",
                 thresholds=None, gpu_indices=None, interval=0.5, pynvml=None, traffic=False,
                 nvml_timeout=NVML_TIMEOUT):
        self.links = list(pcie_links or [])
        self.sysfs_root = sysfs_root
        self.nvme_devices = list(nvme_devices or [])
        self.nvme_cli = nvme_cli
        self.th = health_thresholds(thresholds)
        self.gpu_indices = sorted(set(gpu_indices or []))
        self.interval = interval
        self.pynvml = pynvml
        self.traffic = traffic  # follow every GPU's PCIe bytes (measure/watch.py reads them per job)
        self.nvml_timeout = nvml_timeout  # the longest any wait on NVML lasts
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
                self.sampler = NvmlSampler(pynvml, self.gpu_indices, self.interval, self.traffic, self.nvml_timeout)
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
                with self.sampler.pynvml.budget():
                    for gpu in self.sampler.gpus:
                        if gpu.link:
                            self.gpu_facts[gpu.index] = gpu_memory_health(self.sampler.pynvml, gpu.handle)
            except Exception as exc:
                self.nvml_problem = "NVML read failed: %s" % exc
            finally:
                self.nvml_problem = self.nvml_problem or self.sampler.pynvml.hung
                self.sampler.close()
        self.aer_after = read_aer(self.sysfs_root, sorted(self.aer_before)) if self.aer_before else {}
        self.nvme_after = {n: nvme_smart(n, self.sysfs_root, self.nvme_cli) for n in self.nvme_devices}

    def gpu_load(self):
        return self.sampler.gpu_load() if self.sampler is not None else {}

    def traffic_mark(self):
        """(every GPU's PCIe bytes so far, None) for measure/watch.py, or (None, why there are none),
        or (marks, which GPUs are not followed). Never raises: a broken pynvml is an unknown, not a
        failed benchmark."""
        if self.sampler is None:
            return None, self.nvml_problem or "NVML was not started"
        try:
            marks = self.sampler.mark()
        except Exception as exc:
            return None, "NVML read failed: %s" % exc
        if not marks:
            return None, self.sampler.traffic_problem or self.sampler.problem or "no GPU's traffic is followed"
        return marks, self.sampler.traffic_problem

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
