"""A pynvml stand-in for the watch's fault-injection tests (tests/unit/test_watch_faults.py): put
tests/fault first on PYTHONPATH and the module under test imports this instead of nvidia-ml-py.

A node of GDS_FAKE_NVML_GPUS GPUs (default 2) whose GPU 0 receives and sends
GDS_FAKE_NVML_RATE bytes a second (default 2e8) for as long as NVML is up, the others nothing.
Its PCIe traffic comes from one source, GDS_FAKE_NVML_SOURCE: ``gpm`` (default), ``counters``
(field values 197/198, 32-bit, as an H200's) or ``throughput``; its link is Gen1 x1, so a counter
read every 10 ms never risks a wrap.

GDS_FAKE_NVML_FAULT=KIND[:FUNCTION[:GPU]] breaks FUNCTION (default: the source's reading; ``*``:
every nvml* function) on one GPU handle or all, after GDS_FAKE_NVML_FAULT_AFTER good calls
(default 0):

  raise      NVMLError (NVML_ERROR_UNKNOWN)
  hang       the call does not return (GDS_FAKE_NVML_HANG seconds, default 3600)
  slow       each call takes GDS_FAKE_NVML_SLOW seconds (default 3), then answers
  nan, inf   the value is NaN or infinite
  negative   the value is negative
  huge       the value is 10**400 (an int no counter holds)
  backwards  the byte counters run backwards (GPM and throughput: negative rates)
"""
import os
import threading
import time

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_UNKNOWN = 999
NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197
NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198
NVML_PCIE_UTIL_TX_BYTES = 0
NVML_PCIE_UTIL_RX_BYTES = 1
NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20
NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21
NVML_GPM_METRICS_GET_VERSION = 1
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1

_GPUS = int(os.environ.get("GDS_FAKE_NVML_GPUS", "2"))
_RATE = float(os.environ.get("GDS_FAKE_NVML_RATE", "2e8"))
_SOURCE = os.environ.get("GDS_FAKE_NVML_SOURCE", "gpm")
_READING = {"gpm": "nvmlGpmMetricsGet", "counters": "nvmlDeviceGetFieldValues",
            "throughput": "nvmlDeviceGetPcieThroughput"}[_SOURCE]
_FAULT = (os.environ.get("GDS_FAKE_NVML_FAULT") or "").split(":")
_KIND = _FAULT[0]
_TARGET = _FAULT[1] if len(_FAULT) > 1 and _FAULT[1] else _READING
_ON_GPU = int(_FAULT[2]) if len(_FAULT) > 2 else None
_AFTER = int(os.environ.get("GDS_FAKE_NVML_FAULT_AFTER", "0"))
_calls = {}
_lock = threading.Lock()
_start = [None]


class NVMLError(Exception):
    def __init__(self, value=NVML_ERROR_UNKNOWN):
        Exception.__init__(self, value)
        self.value = value

    def __str__(self):
        return "Not Supported" if self.value == NVML_ERROR_NOT_SUPPORTED else "Unknown Error"


class _O(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _faulty(name, handle=None):
    """The fault KIND when this call of ``name`` is to break, else None."""
    if not _KIND or _TARGET not in (name, "*") or (_ON_GPU is not None and handle != _ON_GPU):
        return None
    with _lock:
        _calls[name] = _calls.get(name, 0) + 1
        if _calls[name] <= _AFTER:
            return None
    if _KIND == "raise":
        raise NVMLError(NVML_ERROR_UNKNOWN)
    if _KIND == "hang":
        time.sleep(float(os.environ.get("GDS_FAKE_NVML_HANG", "3600")))
    if _KIND == "slow":
        time.sleep(float(os.environ.get("GDS_FAKE_NVML_SLOW", "3")))
        return None
    return _KIND


def _bad(kind, value):
    """``value`` as the fault KIND makes it."""
    return {"nan": float("nan"), "inf": float("inf"), "negative": -abs(value) - 13088,
            "huge": 10 ** 400, "backwards": -abs(value) - 1}.get(kind, value)


def _moved(handle):
    """Bytes GPU ``handle`` received (and sent) since nvmlInit."""
    if handle != 0 or _start[0] is None:
        return 0.0
    return _RATE * (time.monotonic() - _start[0])


def nvmlInit():
    _faulty("nvmlInit")
    _start[0] = time.monotonic()


def nvmlShutdown():
    _faulty("nvmlShutdown")


def nvmlDeviceGetCount():
    kind = _faulty("nvmlDeviceGetCount")
    return _bad(kind, _GPUS)


def nvmlDeviceGetHandleByIndex(index):
    _faulty("nvmlDeviceGetHandleByIndex", index)
    if not 0 <= index < _GPUS:
        raise NVMLError(2)
    return index


def nvmlDeviceGetPciInfo(handle):
    _faulty("nvmlDeviceGetPciInfo", handle)
    return _O(busId=b"00000000:%02x:00.0" % (0x18 + handle))


def _link(name, value):
    def read(handle):
        return _bad(_faulty(name, handle), value)
    read.__name__ = name
    return read


nvmlDeviceGetMaxPcieLinkGeneration = _link("nvmlDeviceGetMaxPcieLinkGeneration", 1)
nvmlDeviceGetMaxPcieLinkWidth = _link("nvmlDeviceGetMaxPcieLinkWidth", 1)
nvmlDeviceGetGpuMaxPcieLinkGeneration = _link("nvmlDeviceGetGpuMaxPcieLinkGeneration", 1)
nvmlDeviceGetGpuMaxPcieLinkWidth = _link("nvmlDeviceGetGpuMaxPcieLinkWidth", 1)
nvmlDeviceGetCurrPcieLinkGeneration = _link("nvmlDeviceGetCurrPcieLinkGeneration", 1)
nvmlDeviceGetCurrPcieLinkWidth = _link("nvmlDeviceGetCurrPcieLinkWidth", 1)
nvmlDeviceGetCurrentClocksEventReasons = _link("nvmlDeviceGetCurrentClocksEventReasons", 0)
nvmlDeviceGetRetiredPagesPendingStatus = _link("nvmlDeviceGetRetiredPagesPendingStatus", 0)


def nvmlDeviceGetTotalEccErrors(handle, kind, counter):
    return _bad(_faulty("nvmlDeviceGetTotalEccErrors", handle), 0)


def nvmlDeviceGetRetiredPages(handle, cause):
    _faulty("nvmlDeviceGetRetiredPages", handle)
    return []


def nvmlDeviceGetRemappedRows(handle):
    _faulty("nvmlDeviceGetRemappedRows", handle)
    return (0, 0, 0, 0)


# -- the traffic sources --------------------------------------------------------------------------
def nvmlDeviceGetFieldValues(handle, field_ids):
    kind = _faulty("nvmlDeviceGetFieldValues", handle)
    out = []
    for field in field_ids:
        if _SOURCE != "counters":
            out.append(_O(fieldId=field, nvmlReturn=NVML_ERROR_NOT_SUPPORTED, value=_O(ullVal=0)))
            continue
        value = int(_moved(handle)) % (1 << 32)
        if kind == "backwards":
            value = (3 * 10 ** 9 - int(_moved(0))) % (1 << 32)
        elif kind:
            value = _bad(kind, value)
        out.append(_O(fieldId=field, nvmlReturn=NVML_SUCCESS, value=_O(ullVal=value)))
    return out


def nvmlDeviceGetPcieThroughput(handle, counter):
    kind = _faulty("nvmlDeviceGetPcieThroughput", handle)
    if _SOURCE != "throughput":
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return _bad(kind, (_RATE if handle == 0 else 0.0) / 1024)


def nvmlGpmQueryDeviceSupport(handle):
    _faulty("nvmlGpmQueryDeviceSupport", handle)
    return _O(isSupportedDevice=int(_SOURCE == "gpm"))


def nvmlGpmSampleAlloc():
    _faulty("nvmlGpmSampleAlloc")
    return _O(handle=None, at=None)


def nvmlGpmSampleFree(sample):
    _faulty("nvmlGpmSampleFree")


def nvmlGpmSampleGet(handle, sample):
    _faulty("nvmlGpmSampleGet", handle)
    sample.handle, sample.at, sample.bytes = handle, time.monotonic(), _moved(handle)
    return sample


class c_nvmlGpmMetricsGet_t(object):
    def __init__(self):
        self.metrics = [_O(metricId=0, nvmlReturn=0, value=0.0) for _ in range(4)]


def nvmlGpmMetricsGet(query):
    first, second = query.sample1, query.sample2
    kind = _faulty("nvmlGpmMetricsGet", second.handle)
    span = max(second.at - first.at, 1e-6)
    for metric in query.metrics[:query.numMetrics]:
        metric.value = (second.bytes - first.bytes) / span / (1 << 20)  # MiB/s, rx and tx alike
        if kind:
            metric.value = _bad(kind, metric.value)
    return query
