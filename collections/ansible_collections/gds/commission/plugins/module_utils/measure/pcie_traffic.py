# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCIe bytes each GPU received and sent during a benchmark job (what ``dcgmi dmon -e 1009,1010``
and ``nvidia-smi dmon``'s rxpci/txpci show), and the check that names a GPU other than the job's
that carried its data: cuFile's bounce buffers on a GPU near the drives (the GDS guide's DGX-2
read from GPU 12, landing first on GPU 0).

Three NVML sources, the best first; each GPU says which it used, and with none its figures are
"unknown" with the reasons:

1. GPU Performance Monitoring (GPM, Hopper and newer): a GPM sample at each job mark and every
   sampler interval, and the PCIE_RX/TX_PER_SEC metrics (MiB/s) NVML computes between two samples,
   times their distance. NVML refreshes GPM's counters about every 100 ms and wants samples at
   least that far apart (its GPM documentation), so a sample comes no sooner than GPM_REFRESH
   after the previous one, and a job mark waits GPM_REFRESH first (its last bytes counted, not
   left to the next job). Nothing wraps between samples: on an H200 one interval of 5.6 s across
   297 GB agreed with the byte counters read every 10 ms within 2.2 % (bench/nvml_pcie_probe.py,
   bench/RESULTS.md section 12), and a sample costs about 0.2 ms.
2. The GPU's PCIe byte counters (field values NVML_FI_DEV_PCIE_COUNT_RX_BYTES / TX_BYTES). They
   wrap at 32 bits (nvml.h: "Value can be wrapped"; an H200's raw values stay below 2**32): at
   63 GB/s (Gen5 x16) that is every 68 ms. So the sampler reads them every COUNTER_TICK seconds in a
   thread of their own and adds each difference modulo 2**32; a job during which two reads were
   further apart than a wrap takes at the GPU's fastest link rate (``safe_gap``) could have lost a
   whole wrap, and its figures are unknown. A single read can itself take up to ~95 ms on an H200
   under load, which is why GPM comes first.
3. nvmlDeviceGetPcieThroughput (KB/s over a 20 ms window) sampled by measure/devhealth.py's
   NvmlSampler and integrated over time: an estimate (1.03-1.19 x the counters on the H200).

NVML's numbers are read strictly (core/numbers.py): a rate that is NaN, infinite, negative or
beyond any link, and a byte counter that grew more than the GPU's link can carry between two reads
(it went back: a 32-bit wrap cannot explain it) are a glitch. The bytes of that interval are lost,
so every job it falls in has unknown figures for that GPU, never invented ones.
"""
from __future__ import annotations

import time

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check, gb_text
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import BadNumber, figure, finite, whole, whole_figure
from ansible_collections.gds.commission.plugins.module_utils.hw.nvml import nvml_value
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import link_bytes_per_s
from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import io_is_write

GPM = "NVML GPM PCIe metrics (PCIE_RX/TX_PER_SEC between samples)"
COUNTERS = "NVML PCIe byte counters (NVML_FI_DEV_PCIE_COUNT_RX_BYTES/TX_BYTES)"
THROUGHPUT = "nvmlDeviceGetPcieThroughput (KB/s over 20 ms) sampled and integrated"
# pynvml's values (nvml.h), for a pynvml too old to name them
FIELD_TX, FIELD_RX = 197, 198
UTIL_TX, UTIL_RX = 0, 1
GPM_TX_PER_SEC, GPM_RX_PER_SEC = 20, 21
KB = 1024  # NVML's throughput unit
MIB = 1 << 20  # GPM's PCIe unit
GPM_REFRESH = 0.15  # seconds: NVML refreshes GPM's counters every ~100 ms
COUNTER_WRAP = 1 << 32
COUNTER_TICK = 0.01  # seconds between counter reads (the counting thread)
FASTEST_LINK = link_bytes_per_s(64.0, 16)  # Gen6 x16: when NVML does not say the GPU's link
MAX_RATE = 4 * FASTEST_LINK  # bytes a second no PCIe link carries: a rate above it is garbage
# a counter's growth between two reads may exceed the link's rate over their distance by this
# factor plus this much time (NVML may update the counters in steps); more is no wrap
COUNTER_SLACK, COUNTER_STEP = 1.5, 0.02
# the job's own GPU moves its bytes over PCIe (every GPU transfer type crosses it): figures that
# show it moving less than this share of them are wrong somewhere, not a clean path
OWN_SHARE = 0.5


def byte_counters(pynvml, handle):
    """((rx, tx) cumulative bytes, None) from the GPU's PCIe byte counters, or (None, why the GPU
    has none)."""
    fields = [getattr(pynvml, "NVML_FI_DEV_PCIE_COUNT_RX_BYTES", FIELD_RX),
              getattr(pynvml, "NVML_FI_DEV_PCIE_COUNT_TX_BYTES", FIELD_TX)]
    values, problem = nvml_value(pynvml, ("nvmlDeviceGetFieldValues",), handle, fields)
    if values is None:
        return None, "PCIe byte counters: %s" % problem
    out = []
    for value in list(values)[:2]:
        code = getattr(value, "nvmlReturn", None)
        if code:  # each field answers on its own: NVML_ERROR_NOT_SUPPORTED (3) on older GPUs
            return None, "PCIe byte counters: field %s: %s" % (
                getattr(value, "fieldId", "?"), "not supported" if code == 3 else "NVML error %s" % code)
        try:
            out.append(whole(value.value.ullVal))
        except (BadNumber, AttributeError) as exc:
            return None, "PCIe byte counters: field %s: %s" % (getattr(value, "fieldId", "?"), exc)
    if len(out) < 2:
        return None, "PCIe byte counters: NVML returned %d of 2 fields" % len(out)
    return tuple(out), None


def _rate(value, what):
    """Bytes a second from NVML, strictly: BadNumber names a NaN, a negative or a rate no link carries."""
    try:
        return finite(value, 0.0, MAX_RATE)
    except BadNumber as exc:
        raise BadNumber("%s: %s" % (what, exc))


def gpm_rates(pynvml, first, second):
    """((rx, tx) bytes a second between two GPM samples, None) or (None, why); BadNumber when
    NVML answered with a rate that is no rate."""
    query = pynvml.c_nvmlGpmMetricsGet_t()
    query.version = getattr(pynvml, "NVML_GPM_METRICS_GET_VERSION", 1)
    query.numMetrics = 2
    query.sample1, query.sample2 = first, second
    query.metrics[0].metricId = getattr(pynvml, "NVML_GPM_METRIC_PCIE_RX_PER_SEC", GPM_RX_PER_SEC)
    query.metrics[1].metricId = getattr(pynvml, "NVML_GPM_METRIC_PCIE_TX_PER_SEC", GPM_TX_PER_SEC)
    done, why = nvml_value(pynvml, ("nvmlGpmMetricsGet",), query)
    if done is None:
        return None, "GPM: %s" % why
    out = []
    for metric in list(query.metrics)[:2]:
        if metric.nvmlReturn:
            return None, "GPM: metric %s: NVML error %s" % (metric.metricId, metric.nvmlReturn)
        value = metric.value
        out.append(_rate(value * MIB if isinstance(value, (int, float)) and not isinstance(value, bool) else value,
                         "GPM: metric %s (bytes a second)" % metric.metricId))
    return tuple(out), None


class GpuTraffic(object):
    """One GPU's PCIe bytes received (rx) and sent (tx) since it was made. ``clock`` is the
    sampler's monotonic clock (GPM samples are timed where they are taken)."""

    def __init__(self, pynvml, handle, link_rate=None, clock=time.monotonic):
        self.pynvml, self.handle, self.clock = pynvml, handle, clock
        # the longest gap between two counter reads that cannot hide a whole wrap
        self.safe_gap = COUNTER_WRAP / (link_rate or FASTEST_LINK)
        self.source, self.problem = None, None
        self.rx = self.tx = 0.0
        self.last, self.samples = clock(), 0
        self.late = 0  # counter reads further apart than safe_gap (a wrap may be lost)
        self.worst_gap = 0.0
        self.link_rate = link_rate or FASTEST_LINK
        self.glitches, self.glitch = 0, None  # intervals whose bytes are lost, and the last one's reason
        self.gpm_previous = None  # (time, GPM sample) of the last GPM sample
        why_gpm = self.gpm_start()
        if why_gpm is None:
            self.source = GPM
            return
        counters, why_counters = self.counters()
        if counters is not None:
            self.source, self.previous = COUNTERS, counters
            return
        rates, why_rates = self.rates()
        if rates is not None:
            self.source = THROUGHPUT
        else:
            self.problem = "%s; %s; %s" % (why_gpm, why_counters, why_rates)

    # -- GPM ------------------------------------------------------------------------------------
    def gpm_start(self):
        """None when GPM samples this GPU (the first sample taken), else why not."""
        support, why = nvml_value(self.pynvml, ("nvmlGpmQueryDeviceSupport",), self.handle)
        if support is None:
            return "GPM: %s" % why
        if not getattr(support, "isSupportedDevice", 0):
            return "GPM: not supported on this GPU"
        sample, why = self.gpm_sample()
        if sample is None:
            return why
        self.gpm_previous = sample
        return None

    def gpm_sample(self):
        """((time, sample), None) or (None, why); the time is the middle of the read."""
        sample, why = nvml_value(self.pynvml, ("nvmlGpmSampleAlloc",))
        if sample is None:
            return None, "GPM: %s" % why
        before = self.clock()
        done, why = nvml_value(self.pynvml, ("nvmlGpmSampleGet",), self.handle, sample)
        if done is None:
            self.gpm_free(sample)
            return None, "GPM: %s" % why
        after = self.clock()
        return ((before + after) / 2.0, sample), None

    def gpm_free(self, sample):
        nvml_value(self.pynvml, ("nvmlGpmSampleFree",), sample)

    def gpm_add(self):
        """A new GPM sample; the bytes since the previous one added. False (with ``problem``)
        when GPM failed: the GPU's figures are unknown from then on."""
        if self.gpm_previous is None:
            return False
        if self.clock() - self.gpm_previous[0] < GPM_REFRESH:
            return True  # too soon for a new sample: the totals as of the last one
        sample, why = self.gpm_sample()
        if sample is None:
            self.problem = why
            return False
        (start, first), (end, second) = self.gpm_previous, sample
        try:
            rates, why = gpm_rates(self.pynvml, first, second)
        except BadNumber as exc:
            rates, why = None, None
            self.lost(str(exc))
        self.gpm_free(first)
        self.gpm_previous = sample
        if rates is None and why is None:
            return True  # this interval is lost (counted in glitches); the next one is measured
        if rates is None:
            self.problem = why
            self.gpm_close()
            return False
        span = max(0.0, end - start)
        self.rx += rates[0] * span
        self.tx += rates[1] * span
        self.samples += 1
        return True

    def gpm_close(self):
        if self.gpm_previous is not None:
            self.gpm_free(self.gpm_previous[1])
            self.gpm_previous = None

    def close(self):
        """Give NVML back what this GPU's GPM samples hold."""
        self.gpm_close()

    def lost(self, why):
        """The bytes since the last good read are not counted: the jobs this falls in are unknown."""
        self.glitches += 1
        self.glitch = why

    def state(self):
        """What a mark keeps besides the totals (pcie_traffic.job_traffic compares two marks')."""
        return {"source": self.source, "late": self.late, "worst_gap": self.worst_gap, "safe_gap": self.safe_gap,
                "glitches": self.glitches, "glitch": self.glitch}

    # -- counters and throughput ------------------------------------------------------------------
    def counters(self):
        return byte_counters(self.pynvml, self.handle)

    def rates(self):
        """((rx, tx) bytes a second, None) or (None, why)."""
        out = []
        for counter, default in (("NVML_PCIE_UTIL_RX_BYTES", UTIL_RX), ("NVML_PCIE_UTIL_TX_BYTES", UTIL_TX)):
            value, problem = nvml_value(self.pynvml, ("nvmlDeviceGetPcieThroughput",), self.handle,
                                        getattr(self.pynvml, counter, default))
            if value is None:
                return None, "PCIe throughput: %s" % problem
            try:
                out.append(_rate(value * KB if isinstance(value, (int, float)) and not isinstance(value, bool)
                                 else value, "PCIe throughput (bytes a second)"))
            except BadNumber as exc:
                return None, str(exc)
        return tuple(out), None

    def sample(self, now):
        """One GPM or throughput sample: a throughput rate now stands for the time since the last
        sample (the counters are read by ``read_counters``, more often)."""
        if self.source == GPM:
            self.gpm_add()
            return
        if self.source != THROUGHPUT:
            return
        rates, problem = self.rates()
        if rates is None:
            self.problem = problem
            self.lost(problem)  # the time since the last sample is not counted
        else:
            span = max(0.0, now - self.last)
            self.rx += rates[0] * span
            self.tx += rates[1] * span
            self.samples += 1
        self.last = now

    def read_counters(self, now):
        counters, problem = self.counters()
        if counters is None:
            self.problem = problem
            return False
        gap = now - self.last
        if gap > self.safe_gap:
            self.late += 1
            self.worst_gap = max(self.worst_gap, gap)
        grew = [(new - old) % COUNTER_WRAP for new, old in zip(counters, self.previous)]
        most = self.link_rate * (COUNTER_SLACK * max(gap, 0.0) + COUNTER_STEP)
        if max(grew) > most:
            self.lost("PCIe byte counters went back or jumped (rx %d -> %d, tx %d -> %d in %d ms): more than "
                      "the link carries, not a 32-bit wrap" % (self.previous[0], counters[0], self.previous[1],
                                                               counters[1], round(gap * 1000)))
        else:
            self.rx += grew[0]
            self.tx += grew[1]
        self.previous, self.last = counters, now
        self.samples += 1
        return True

    def totals(self, now):
        """(rx, tx) bytes since the start, or None (with ``problem``) when unknown."""
        if self.source == GPM:
            return [self.rx, self.tx] if self.gpm_add() else None
        if self.source == COUNTERS:
            return [self.rx, self.tx] if self.read_counters(now) else None
        if self.source == THROUGHPUT:
            self.sample(now)
            return [self.rx, self.tx]
        return None


def job_traffic(before, after):
    """[{index, bdf, rx_bytes, tx_bytes, source}] between two marks of the sampler
    ({index: {bdf, totals, source, problem, late, glitches, ...}}); a GPU without figures has
    ``unknown``: not sampled, a counter gap that may hide a wrap, a lost interval, or totals
    that went back."""
    out = []
    for index in sorted(after):
        end, start = after[index], (before or {}).get(index) or {}
        entry = {"index": index, "bdf": end.get("bdf"), "source": end.get("source")}
        if end.get("totals") is None or start.get("totals") is None:
            entry["unknown"] = end.get("problem") or start.get("problem") or "not sampled"
        elif (end.get("late") or 0) > (start.get("late") or 0):
            entry["unknown"] = ("PCIe byte counters read %d time(s) more than %d ms apart (up to %d ms): "
                                "a 32-bit wrap may be lost" % (end["late"] - (start.get("late") or 0),
                                                               round(end.get("safe_gap", 0) * 1000),
                                                               round(end.get("worst_gap", 0) * 1000)))
        elif (end.get("glitches") or 0) > (start.get("glitches") or 0):
            entry["unknown"] = "%d interval(s) of the job not counted: %s" % (
                end["glitches"] - (start.get("glitches") or 0), end.get("glitch"))
        else:
            rx, tx = (end["totals"][i] - start["totals"][i] for i in (0, 1))
            if min(rx, tx) < 0:
                entry["unknown"] = "NVML's totals went back during the job (rx %+d, tx %+d bytes)" % (rx, tx)
            else:
                entry["rx_bytes"], entry["tx_bytes"] = int(round(rx)), int(round(tx))
        out.append(entry)
    return out


# --------------------------------------------------------------------------------------------
# The check
# --------------------------------------------------------------------------------------------
def link_class(topology, gpu, drives):
    """GPU ``gpu``'s link class to the drives, from the topology's matrix: "PIX to nvme2n1,
    nvme3n1", or per drive where they differ; None when the matrix does not know."""
    row = ((topology or {}).get("matrix") or {}).get("GPU%s" % gpu) or {}
    classes = [(d, row.get(d)) for d in drives or () if row.get(d)]
    if not classes:
        return None
    if len({c for dummy, c in classes}) == 1:
        return "%s to %s" % (classes[0][1], ", ".join(d for d, dummy in classes))
    return ", ".join("%s to %s" % (c, d) for d, c in classes)


def _buffers(cufile, index):
    rows = cufile.get("gpus") if isinstance(cufile.get("gpus"), list) else []
    row = next((r for r in rows if isinstance(r, dict) and r.get("index") == index), {})
    return "%s of %s pool buffers in use" % (row.get("pool_used"), row.get("pool_total"))


def _indices(value):
    """A list of GPU indices as read, else None (not a list, or an entry that is no index)."""
    if not isinstance(value, list) or any(whole_figure(i) is None for i in value):
        return None
    return [whole_figure(i) for i in value]


def _gpu_list(indices):
    return ", ".join("GPU%s" % i for i in indices)


def _nvml_figures(gpus, topology, gpu, unknown):
    """NVML's figures of a job's GPUs: (the records with byte counts, {index: PCI address}, what
    NVML could not say: GPUs without figures, figures that are no byte counts, GPUs not followed)."""
    # NVML's figures: a list of GPU records, each with its index (anything else is unknown)
    missing = []
    if gpus is not None and not isinstance(gpus, list):
        missing.append("NVML's figures are no list of GPUs: %r" % (gpus,))
    records = []
    for number, g in enumerate(gpus if isinstance(gpus, list) else []):
        if isinstance(g, dict) and whole_figure(g.get("index")) is not None:
            records.append(g)
        else:
            missing.append("GPU record %d of NVML's figures is no GPU's (%r)" % (number, g))
    bdfs = {g.get("index"): g.get("bdf") for g in (topology or {}).get("gpus") or [] if isinstance(g, dict)}
    bdfs.update((g["index"], g.get("bdf")) for g in records if g.get("bdf"))

    known = []
    for g in records:
        if "unknown" in g:
            missing.append("GPU%s %s" % (g["index"], g["unknown"]))
        elif figure(g.get("rx_bytes")) is None or figure(g.get("tx_bytes")) is None:
            missing.append("GPU%s figures are no byte counts (rx %r, tx %r)"
                           % (g["index"], g.get("rx_bytes"), g.get("tx_bytes")))
        else:
            known.append(g)
    seen = {g["index"] for g in records}
    unfollowed = sorted(i for i in bdfs if isinstance(i, int) and i not in seen)
    if gpus and unfollowed:
        missing.append("%s of the topology not followed by NVML" % _gpu_list(unfollowed))
    if unknown and gpus:
        missing.append(unknown)
    if gpu not in seen:
        missing.append("GPU%s (the job's) not followed by NVML" % gpu)
    return known, bdfs, missing


def _bounce_notes(who, target, mine, write, moved_ok, known, cufile, missing):
    """The detail of a bounce check: the job's GPU, the busiest GPUs, the figures' source,
    cuFile's bounce buffers, what is unknown."""
    notes = []
    if target is not None:
        notes.append("%s %s %s over PCIe, %d%% of the %s the job moved" % (
            who(target), "sent" if write else "received", gb_text(mine), round(100.0 * mine / moved_ok),
            gb_text(moved_ok)))
    notes += ["GPU%s rx %s tx %s" % (g["index"], gb_text(g["rx_bytes"]), gb_text(g["tx_bytes"]))
              for g in sorted(known, key=lambda g: -(g["rx_bytes"] + g["tx_bytes"]))[:4]]
    sources = sorted({g["source"] for g in known if g.get("source")})
    if sources:
        notes.append("from %s" % " and ".join(sources))
    if cufile is not None and _indices(cufile.get("buffer_gpus")):
        notes.append("cuFile's bounce buffers on %s" % ", ".join(
            "GPU%s (%s)" % (i, _buffers(cufile, i)) for i in _indices(cufile["buffer_gpus"])))
    if missing and known:
        notes.append("unknown: %s" % "; ".join(missing))
    return notes


def bounce_check(prefix, gpu, moved, io_type, gpus, topology, drives, th, unknown=None, cufile=None,
                 expected_bounce=False):
    """``bench: <job>: bounce``: the target GPU ``gpu`` should be the only one whose PCIe traffic
    compares with the ``moved`` bytes of the job. Another GPU that received at least
    ``bounce_share`` of them carried the data (cuFile's bounce buffers): WARN or FAIL per profile,
    naming it, its PCI address and its link class to the drives. On the planner's non-affine job
    (``expected_bounce``) a bounce is what it measures: PASS, named.

    "No other GPU carried the data" (PASS) needs every GPU of the node followed (``unknown`` says
    which are not; the topology's GPUs count too) and the job's own GPU moving OWN_SHARE of them:
    a GPU whose figures are unknown might have carried it, and figures that miss the job's bytes
    are wrong somewhere (WARN). Without NVML's complete figures, cuFile's own statistics
    (``cufile``, gds_stats) decide, and PASS only when they show the job's GPU, and no other, doing
    its I/O. Anything else is SKIP with the reason."""
    name = prefix + "bounce"
    share = th["bounce_share"]
    expected = "only GPU%s receives >= %d%% of the bytes the job moved" % (gpu, round(share * 100))
    found = "PASS" if expected_bounce else th["bounce_verdict"]
    if expected_bounce:
        expected += " (or a GPU near the drives: the non-affine pair)"
    write = io_is_write(io_type)
    if cufile is not None and not isinstance(cufile, dict):
        cufile = {"unknown": "no record of cuFile's statistics: %r" % (cufile,)}
    cufile_why = (cufile or {}).get("unknown")
    cufile = cufile if cufile and "unknown" not in cufile else None
    known, bdfs, missing = _nvml_figures(gpus, topology, gpu, unknown)

    def who(g):
        where = link_class(topology, g["index"], drives)
        return "GPU%s (%s%s)" % (g["index"], bdfs.get(g["index"]) or "PCI address unknown",
                                 ", " + where if where else "")

    moved_ok = figure(moved)
    if not moved_ok:
        return check(name, "SKIP", expected, "unknown", "the job's record has no byte count (%r)" % (moved,))

    target = next((g for g in known if g["index"] == gpu), None)
    mine = (target["tx_bytes"] if write else target["rx_bytes"]) if target is not None else None
    notes = _bounce_notes(who, target, mine, write, moved_ok, known, cufile, missing)

    # judged: the job's bytes and each GPU's, as NVML gave them
    inputs = {"bytes moved": moved, "GPUs' rx/tx bytes": [[g["rx_bytes"], g["tx_bytes"]] for g in known]}
    carriers = sorted((g for g in known if g["index"] != gpu and g["rx_bytes"] >= share * moved_ok),
                      key=lambda g: -g["rx_bytes"])
    if carriers:
        actual = "; ".join("%s received %s, %d%% of the bytes the job moved" % (
            who(g), gb_text(g["rx_bytes"]), round(100.0 * g["rx_bytes"] / moved_ok)) for g in carriers)
        return check(name, found, expected, actual, "; ".join(notes), inputs=inputs)
    if known and not missing:
        if mine < OWN_SHARE * moved_ok:
            actual = "GPU%s %s %s, %d%% of the %s the job moved: NVML's figures do not account for the job's data" % (
                gpu, "sent" if write else "received", gb_text(mine), round(100.0 * mine / moved_ok), gb_text(moved_ok))
            return check(name, "WARN", expected, actual, "; ".join(notes))
        return check(name, "PASS", expected, "no other GPU carried the data", "; ".join(notes), inputs=inputs)
    nvml_why = "; ".join(missing) if known else (unknown or "; ".join(missing) or "no GPU's PCIe traffic was read")
    if cufile is not None:
        return _cufile_bounce(name, gpu, cufile, expected, found, who, nvml_why)
    why = "; ".join(notes + [nvml_why]) if known else nvml_why
    return check(name, "SKIP", expected, "unknown", why + ("; cuFile: %s" % cufile_why if cufile_why else ""))


def _cufile_bounce(name, gpu, cufile, expected, found, who, nvml_why):
    """The bounce check from cuFile's per-GPU statistics alone (NVML's figures incomplete): another
    GPU's bounce buffers in use is a finding; PASS needs both lists read (``buffer_gpus``,
    ``io_gpus``: lists of GPU indices), no other GPU's buffers and the I/O on GPU ``gpu`` alone."""
    notes = ["from cuFile's statistics (%s); NVML: %s" % (cufile.get("source"), nvml_why)]
    lists = {key: _indices(cufile.get(key)) for key in ("buffer_gpus", "io_gpus")}
    held = [i for i in lists["buffer_gpus"] or [] if i != gpu]
    if held:
        return check(name, found, expected, "; ".join(
            "%s held cuFile's bounce buffers (%s)" % (who({"index": i}), _buffers(cufile, i)) for i in held),
            "; ".join(notes), inputs=lists)
    unread = ["%s %r" % (key, cufile.get(key)) for key, value in lists.items() if value is None]
    if unread:
        return check(name, "SKIP", expected, "unknown", "; ".join(
            ["cuFile's statistics hold no list of GPU indices: %s" % ", ".join(unread)] + notes))
    io = lists["io_gpus"]
    if io != [gpu]:
        where = "on no GPU" if not io else "on %s" % _gpu_list(io)
        return check(name, "SKIP", expected, "unknown", "; ".join(
            ["cuFile's statistics show I/O %s, not on GPU%s alone: they do not describe this job" % (where, gpu)]
            + notes))
    return check(name, "PASS", expected, "cuFile used no other GPU's bounce buffers",
                 "; ".join(["cuFile I/O on GPU %s" % gpu] + notes), inputs=lists)
