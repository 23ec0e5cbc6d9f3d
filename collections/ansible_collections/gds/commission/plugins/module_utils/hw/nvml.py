# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts from NVML (pynvml, package nvidia-ml-py) instead of parsing nvidia-smi.

One place that talks to NVML: gds_topology takes the index order from it, gds_platform the
names, memory, BAR1 sizes and driver version. Everything NVML can fail with becomes
NvmlUnavailable with the reason, so callers can fall back to sysfs. ``BoundedNvml`` puts pynvml
behind a deadline for the benchmark's sampler (measure/devhealth.py): a driver call that hangs
never returns, and nothing may wait on it without bound.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from ansible_collections.gds.commission.plugins.module_utils.core.files import decode
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import normalize_bdf


NOT_SUPPORTED = "not supported"


def why(exc):
    """An NVML error in words: NOT_SUPPORTED for NVMLError_NotSupported."""
    text = str(exc) or exc.__class__.__name__
    return NOT_SUPPORTED if "NotSupported" in exc.__class__.__name__ or "Not Supported" in text else text


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


NVML_TIMEOUT = 5.0  # seconds: NVML answers in well under 0.1 s even under load (bench/RESULTS.md 12)


class NvmlHung(Exception):
    """An NVML call did not return in time (or NVML hung before): its value is unknown."""


class _Call(object):
    __slots__ = ("fn", "args", "value", "error", "done")

    def __init__(self, fn, args):
        self.fn, self.args, self.value, self.error = fn, args, None, None
        self.done = threading.Event()


class _Worker(object):
    """A thread that makes the NVML calls of one calling thread, one at a time."""

    def __init__(self):
        self._calls = []
        self._ready = threading.Condition()
        thread = threading.Thread(target=self._run, name="nvml-call")
        thread.daemon = True  # a call stuck in the driver must not keep the module alive
        thread.start()

    def submit(self, call):
        with self._ready:
            self._calls.append(call)
            self._ready.notify()

    def _run(self):
        while True:
            with self._ready:
                while not self._calls:
                    self._ready.wait()
                call = self._calls.pop(0)
            if call is None:
                return
            try:
                call.value = call.fn(*call.args)
            except BaseException as exc:  # handed to the caller, whatever it is
                call.error = exc
            call.done.set()


class BoundedNvml(object):
    """pynvml with every ``nvml*`` function behind a deadline; constants and types pass through.

    Each calling thread's calls run on a worker thread of its own, and the caller waits at most
    ``timeout`` seconds, or what is left of its ``budget``. A call that does not answer in time
    marks NVML hung (``hung`` says which call): from then on every call raises NvmlHung at once,
    since the stuck call holds the driver and a second call would only wait again."""

    def __init__(self, pynvml, timeout=NVML_TIMEOUT):
        self.module, self.timeout = pynvml, float(timeout)
        self.hung = None
        self._local = threading.local()
        self._workers = []
        self._lock = threading.Lock()

    def __getattr__(self, name):
        if name == "module":  # not set yet (a copy being made): no recursion through getattr
            raise AttributeError(name)
        value = getattr(self.module, name)
        if not name.startswith("nvml") or not callable(value):
            return value
        return lambda *args: self.call(name, value, args)

    def mark_hung(self, why):
        if self.hung is None:
            self.hung = why

    @contextmanager
    def budget(self, seconds=None):
        """The calls of this thread inside the block wait ``seconds`` (default ``timeout``) in
        all: a slow NVML (each call late, none hung) is hung for the block as a whole."""
        outer = getattr(self._local, "until", None)
        until = time.monotonic() + (self.timeout if seconds is None else seconds)
        self._local.until = until if outer is None else min(outer, until)
        try:
            yield
        finally:
            self._local.until = outer

    def left(self):
        """Seconds this thread may still wait on NVML."""
        until = getattr(self._local, "until", None)
        return self.timeout if until is None else min(self.timeout, until - time.monotonic())

    def call(self, name, fn, args=()):
        if self.hung is not None:
            raise NvmlHung(self.hung)
        wait = self.left()
        if wait <= 0:
            self.mark_hung("NVML too slow: the calls before %s took more than %g s" % (name, self.timeout))
            raise NvmlHung(self.hung)
        worker = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = _Worker()
            with self._lock:
                self._workers.append(worker)
        call = _Call(fn, args)
        worker.submit(call)
        if not call.done.wait(wait):
            self._local.worker = None  # stuck in the driver: left behind
            with self._lock:
                self._workers.remove(worker)
            if wait < self.timeout / 2:  # the calls before it used most of the budget: slow, not stuck
                self.mark_hung("NVML too slow: %s and the calls before it took more than %g s" % (name, self.timeout))
            else:
                self.mark_hung("NVML hung: %s did not return within %g s" % (name, self.timeout))
            raise NvmlHung(self.hung)
        if call.error is not None:
            raise call.error
        return call.value

    def close(self):
        """End the workers that are not stuck in a call; later calls answer at once."""
        self.mark_hung("NVML was shut down")
        with self._lock:
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.submit(None)


class NvmlUnavailable(Exception):
    """pynvml is missing, or NVML cannot be initialised (no driver, no GPU, no permission)."""


def _text(value):
    return decode(value) if isinstance(value, bytes) else str(value)


NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS of NVML 12 (Hopper); pynvml's own constant first
NVLINK_DEVICE_SWITCH = 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH
P2P_CAPS_INDEX_NVLINK = 2  # NVML_P2P_CAPS_INDEX_NVLINK
P2P_STATUS_OK = 0


def _active_links(pynvml, handle, bdfs):
    """(far ends, links to a switch or an end outside this node) of a GPU's active NVLinks.

    A link past the GPU's last answers InvalidArgument or NotSupported: the count ends there."""
    ends, switched = [], 0
    for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", NVLINK_MAX_LINKS)):
        try:
            if not pynvml.nvmlDeviceGetNvLinkState(handle, link):
                continue
        except Exception:
            break
        end = kind = None
        try:
            end = normalize_bdf(_text(pynvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link).busId))
        except Exception:
            pass  # a switch the VM does not show has no PCI address here
        try:
            kind = pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link)
        except Exception:
            pass
        if end in bdfs and kind != NVLINK_DEVICE_SWITCH:
            ends.append(end)
        else:
            switched += 1
    return ends, switched


def nvlink_peers(pynvml, handles, bdfs):
    """[{peer bdf: links}] per GPU: the NVLinks to every other GPU as ``nvidia-smi topo -m``
    counts them (NV#). A link whose far end is the peer counts for that peer; behind NVSwitches
    (the far end a switch, or not a GPU of this node) every such link of the GPU counts for each
    peer NVML says it reaches over NVLink (nvmlDeviceGetP2PStatus), as NV18 between every pair of
    an HGX H100 shows. A GPU without NVLink has {}."""
    links = [_active_links(pynvml, handle, set(bdfs)) for handle in handles]
    out = []
    for i, (ends, switched) in enumerate(links):
        peers = {}
        for j, bdf in enumerate(bdfs):
            if i == j:
                continue
            count = ends.count(bdf)
            if not count and switched:
                try:
                    reach = pynvml.nvmlDeviceGetP2PStatus(handles[i], handles[j], getattr(
                        pynvml, "NVML_P2P_CAPS_INDEX_NVLINK", P2P_CAPS_INDEX_NVLINK))
                except Exception:
                    reach = None
                count = switched if reach == getattr(pynvml, "NVML_P2P_STATUS_OK", P2P_STATUS_OK) else 0
            if count:
                peers[bdf] = count
        out.append(peers)
    return out


def nvlink_matrix(gpus, nvml):
    """{GPU<i>: {GPU<j>: links}} from NVML, nvidia-smi topo -m's NV# cells; None without NVML."""
    if not nvml:
        return None
    index = {gpu["bdf"]: "GPU%d" % gpu["index"] for gpu in gpus}
    return {index[g["bdf"]]: {index[peer]: n for peer, n in (g.get("nvlinks") or {}).items() if peer in index}
            for g in nvml if g["bdf"] in index}


def nvml_gpus(pynvml=None):
    """[{index, bdf, name, uuid, memory_total_bytes, bar1_total_bytes, nvlinks}] in NVML's index
    order, plus ``driver_version`` and ``cuda_driver_version`` on every entry (``nvlinks``: see
    nvlink_peers)."""
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
        gpus, handles = [], []
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
            handles.append(handle)
        links = nvlink_peers(pynvml, handles, [g["bdf"] for g in gpus])
        for entry, peers in zip(gpus, links):
            entry["nvlinks"] = peers
        return gpus
    except Exception as exc:
        raise NvmlUnavailable("NVML query failed: %s" % exc)
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
