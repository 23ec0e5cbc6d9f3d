#!/usr/bin/env python3
"""Which NVML source counts a GPU's PCIe bytes right on this machine, and how late its reads come.

A load whose bytes are known runs on one GPU while NVML is read three ways, side by side:

  counters   fields NVML_FI_DEV_PCIE_COUNT_RX/TX_BYTES every 10 ms in a thread, summed modulo
             2**32 (they wrap), every read's duration and the gaps between reads recorded;
  gpm        GPU Performance Monitoring (Hopper and newer): nvmlGpmSampleGet every --interval
             and PCIE_RX/TX_PER_SEC between consecutive samples (MiB/s) times their distance,
             and once between the first and the last sample (one interval for the whole load);
  throughput nvmlDeviceGetPcieThroughput (KB/s over 20 ms) every --interval, integrated.

Each mode runs with and without a second thread that queries the link state every --interval
(what measure/devhealth.py's NvmlSampler does), to show whether those queries hold up the
counter reads. Loads: ``copy`` (cudaMemcpy host->device from pinned memory through ctypes,
bytes exact, tens of GB/s) and ``gdsbench`` (a cuFile read of --dir, bytes from its record).

  nvml_pcie_probe.py [--gpu 0] [--seconds 5] [--interval 0.5] [--gdsbench PATH --dir DIR]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import threading
import time

try:
    import pynvml
except ImportError:  # --help needs none; main() says what is missing
    pynvml = None

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from collection_path import use_collection  # beside this script
use_collection(__file__)
# the product's readers of both sources, so the probe measures what gds_bench reads
from ansible_collections.gds.commission.plugins.module_utils.measure.pcie_traffic import (
    COUNTER_WRAP, byte_counters, gpm_rates)


def copy_load(gpu, seconds):
    """Child process: cudaMemcpy host->device for ``seconds``; prints the bytes copied."""
    lib = None
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        for base in ("", os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "lib64", "")):
            try:
                lib = ctypes.CDLL(base + name)
                break
            except OSError:
                continue
        if lib:
            break
    if lib is None:
        sys.exit("no libcudart")
    size = 256 << 20
    dev, host = ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.cudaSetDevice(gpu) == 0
    assert lib.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(size)) == 0
    assert lib.cudaHostAlloc(ctypes.byref(host), ctypes.c_size_t(size), 0) == 0
    done, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        assert lib.cudaMemcpy(dev, host, ctypes.c_size_t(size), 1) == 0
        done += size
    lib.cudaDeviceSynchronize()
    print(json.dumps({"bytes": done}))


class Probe(object):
    def __init__(self, handle, interval, link_thread):
        self.h, self.interval, self.link_thread = handle, interval, link_thread
        self.stop = threading.Event()
        self.gaps, self.durations, self.link_durations, self.gpm_durations = [], [], [], []
        self.rx = self.tx = 0
        self.prev = self.counters()
        self.last = time.monotonic()
        self.gpm = self.gpm_support()
        self.gpm_samples = []  # (time, sample)
        self.tp_rx = 0.0
        self.tp_last = time.monotonic()

    def counters(self):
        return byte_counters(pynvml, self.h)[0]

    def gpm_support(self):
        try:
            return bool(pynvml.nvmlGpmQueryDeviceSupport(self.h).isSupportedDevice)
        except Exception as exc:
            print("  GPM: %s" % exc)
            return False

    def gpm_sample(self):
        s = pynvml.nvmlGpmSampleAlloc()
        t0 = time.monotonic()
        pynvml.nvmlGpmSampleGet(self.h, s)
        t1 = time.monotonic()
        self.gpm_durations.append(t1 - t0)
        self.gpm_samples.append(((t0 + t1) / 2, s))

    def count_loop(self):
        while not self.stop.wait(0.01):
            t0 = time.monotonic()
            c = self.counters()
            t1 = time.monotonic()
            self.durations.append(t1 - t0)
            if c is None:
                continue
            self.gaps.append(t1 - self.last)
            self.rx += (c[0] - self.prev[0]) % COUNTER_WRAP
            self.tx += (c[1] - self.prev[1]) % COUNTER_WRAP
            self.prev, self.last = c, t1

    def slow_loop(self):
        while not self.stop.wait(self.interval):
            if self.gpm:
                self.gpm_sample()
            t0 = time.monotonic()
            try:
                kb = pynvml.nvmlDeviceGetPcieThroughput(self.h, pynvml.NVML_PCIE_UTIL_RX_BYTES)
                self.tp_rx += kb * 1024.0 * (t0 - self.tp_last)
            except Exception:
                pass
            self.tp_last = t0
            if self.link_thread:
                t0 = time.monotonic()
                pynvml.nvmlDeviceGetCurrPcieLinkGeneration(self.h)
                pynvml.nvmlDeviceGetCurrPcieLinkWidth(self.h)
                pynvml.nvmlDeviceGetCurrentClocksEventReasons(self.h)
                self.link_durations.append(time.monotonic() - t0)

    def run(self, load):
        if self.gpm:
            self.gpm_sample()
        threads = [threading.Thread(target=self.count_loop), threading.Thread(target=self.slow_loop)]
        for t in threads:
            t.start()
        moved = load()
        self.stop.set()
        for t in threads:
            t.join()
        c = self.counters()
        self.rx += (c[0] - self.prev[0]) % COUNTER_WRAP
        if self.gpm:
            self.gpm_sample()
        return moved

    def report(self, moved):
        def ms(xs):
            if not xs:
                return "-"
            xs = sorted(xs)
            return "p50 %.1f p99 %.1f max %.1f ms (n=%d)" % (
                1e3 * statistics.median(xs), 1e3 * xs[int(0.99 * (len(xs) - 1))], 1e3 * xs[-1], len(xs))
        out = {"moved": moved, "counters_rx": self.rx, "counter_read": ms(self.durations),
               "counter_gap": ms(self.gaps), "link_query": ms(self.link_durations),
               "throughput_rx": self.tp_rx}
        print("  bytes moved by the load: %.3f GB" % (moved / 1e9))
        print("  counters:   rx %.3f GB = %.4f x moved; reads %s; gaps %s; late (> 68 ms) %d" % (
            self.rx / 1e9, self.rx / moved, ms(self.durations), ms(self.gaps), sum(g > 0.068 for g in self.gaps)))
        if self.link_thread:
            print("  link queries (gen, width, clock events): %s" % ms(self.link_durations))
        print("  throughput: rx %.3f GB = %.4f x moved (integrated every %.2f s)" % (
            self.tp_rx / 1e9, self.tp_rx / moved, self.interval))
        if self.gpm and len(self.gpm_samples) >= 2:
            total, bad = 0.0, []
            for (t1, s1), (t2, s2) in zip(self.gpm_samples, self.gpm_samples[1:]):
                rates, why = gpm_rates(pynvml, s1, s2)
                if rates is None:
                    bad.append(why)
                else:
                    total += rates[0] * (t2 - t1)
            (t1, s1), (t2, s2) = self.gpm_samples[0], self.gpm_samples[-1]
            rates, why = gpm_rates(pynvml, s1, s2)
            once = rates[0] * (t2 - t1) if rates else float("nan")
            print("  gpm:        rx %.3f GB = %.4f x moved summed over %d intervals%s; one interval of %.2f s: "
                  "%.3f GB = %.4f x moved%s; sample reads %s" % (
                      total / 1e9, total / moved, len(self.gpm_samples) - 1, " (errors %s)" % bad if bad else "",
                      t2 - t1, once / 1e9, once / moved, " (%s)" % why if why else "", ms(self.gpm_durations)))
            out.update(gpm_rx_sum=total, gpm_rx_once=once)
            for dummy, s in self.gpm_samples:
                pynvml.nvmlGpmSampleFree(s)
        return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpu", type=int, default=0)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--interval", type=float, default=0.5)
    p.add_argument("--gdsbench")
    p.add_argument("--dir")
    p.add_argument("--copy-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json")
    a = p.parse_args()
    if pynvml is None:
        sys.exit("nvml_pcie_probe: needs pynvml (nvidia-ml-py; the lab carries its wheel)")
    if a.copy_child:
        return copy_load(a.gpu, a.seconds)
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(a.gpu)
    print("GPU %d: %s, driver %s, link Gen%s x%s (max Gen%s x%s)" % (
        a.gpu, pynvml.nvmlDeviceGetName(h), pynvml.nvmlSystemGetDriverVersion(),
        pynvml.nvmlDeviceGetCurrPcieLinkGeneration(h), pynvml.nvmlDeviceGetCurrPcieLinkWidth(h),
        pynvml.nvmlDeviceGetMaxPcieLinkGeneration(h), pynvml.nvmlDeviceGetMaxPcieLinkWidth(h)))

    def copy():
        r = subprocess.run([sys.executable, __file__, "--copy-child", "--gpu", str(a.gpu), "--seconds", str(a.seconds)],
                           capture_output=True, text=True, check=False)
        if r.returncode:
            raise SystemExit("copy load failed: %s" % r.stderr[-500:])
        return json.loads(r.stdout.strip().splitlines()[-1])["bytes"]

    def gds():
        rec = "/tmp/nvml_probe_gds.json"
        env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
        r = subprocess.run([a.gdsbench, "-D", a.dir, "-d", str(a.gpu), "-x", "0", "-I", "0", "-w", "8", "-s", "1G",
                            "-i", "1M", "-T", str(int(a.seconds)), "--json", rec], capture_output=True, text=True, env=env, check=False)
        if r.returncode:
            raise SystemExit("gdsbench failed: %s" % r.stderr[-500:])
        with open(rec) as f:
            return json.load(f)["bytes"]

    loads = [("copy (cudaMemcpy H2D)", copy)]
    if a.gdsbench and a.dir:
        loads.append(("gdsbench cuFile read", gds))
    results = []
    for name, load in loads:
        for link_thread in (True, False):
            print("\n== %s, counters every 10 ms, %s" % (
                name, "link queries every %.1f s in another thread" % a.interval if link_thread else "no link queries"))
            probe = Probe(h, a.interval, link_thread)
            moved = probe.run(load)
            results.append(dict(probe.report(moved), load=name, link_thread=link_thread))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    pynvml.nvmlShutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
