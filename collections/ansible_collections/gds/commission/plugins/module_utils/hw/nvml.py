# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts from NVML (pynvml, package nvidia-ml-py) instead of parsing nvidia-smi.

One place that talks to NVML: gds_topology takes the index order from it, gds_platform the
names, memory, BAR1 sizes and driver version. Everything NVML can fail with becomes
NvmlUnavailable with the reason, so callers can fall back to sysfs.
"""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.core.files import decode
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import normalize_bdf


def why(exc):
    """An NVML error in words: "not supported" for NVMLError_NotSupported."""
    text = str(exc) or exc.__class__.__name__
    return "not supported" if "NotSupported" in exc.__class__.__name__ or "Not Supported" in text else text


def nvml_value(pynvml, names, *args):
    """(value, None) from the first of ``names`` pynvml has, or (None, why it is unknown)."""
    for name in names:
        fn = getattr(pynvml, name, None)
        if fn is None:
            continue
        try:
            return fn(*args), None
        except Exception as exc:  # NVMLError subclasses; never let one end the run
            return None, "%s: %s" % (name, why(exc))
    return None, "%s: missing in this pynvml" % names[0]


class NvmlUnavailable(Exception):
    """pynvml is missing, or NVML cannot be initialised (no driver, no GPU, no permission)."""


def _text(value):
    return decode(value) if isinstance(value, bytes) else str(value)


def nvml_gpus(pynvml=None):
    """[{index, bdf, name, uuid, memory_total_bytes, bar1_total_bytes}] in NVML's index order,
    plus ``driver_version`` and ``cuda_driver_version`` on every entry."""
    if pynvml is None:
        try:
            import pynvml  # noqa: F811  (imported lazily: nodes without GPUs lack it)
        except ImportError:
            raise NvmlUnavailable("python module pynvml (package nvidia-ml-py) is not installed")
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses, or OSError for a missing lib
        raise NvmlUnavailable("nvmlInit failed: %s" % exc)
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        try:
            cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            cuda = "%d.%d" % (cuda // 1000, (cuda % 1000) // 10)
        except Exception:
            cuda = None
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            pci = pynvml.nvmlDeviceGetPciInfo(handle)
            entry = {
                "index": index,
                "bdf": normalize_bdf(_text(pci.busId)),
                "name": _text(pynvml.nvmlDeviceGetName(handle)),
                "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                "driver_version": driver,
                "cuda_driver_version": cuda,
            }
            try:
                entry["bar1_total_bytes"] = int(pynvml.nvmlDeviceGetBAR1MemoryInfo(handle).bar1Total)
            except Exception:
                entry["bar1_total_bytes"] = None
            gpus.append(entry)
        return gpus
    except Exception as exc:
        raise NvmlUnavailable("NVML query failed: %s" % exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
