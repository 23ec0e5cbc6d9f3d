"""Every GPU's PCIe traffic during a job (plugins/module_utils/measure/pcie_traffic.py through gds_devhealth's
NvmlSampler) and the bounce check, on the GDS guide's DGX-2 figures: dcgmi dmon -e 1009,1010 while
GPU 12 reads md127 (GPU 0 carries the data), nvidia-smi dmon while GPU 2 does (it alone receives)."""
import ctypes
import json

import pynvml
import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure import devhealth as gds_devhealth
from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.measure.devhealth import HealthRun
from ansible_collections.gds.commission.plugins.module_utils.measure.pcie_traffic import COUNTERS, GPM, THROUGHPUT, link_class
from ansible_collections.gds.commission.plugins.module_utils.measure.watch import JobWatch
from conftest import run_module

DGX2_GPUS = ["0000:34:00.0", "0000:36:00.0", "0000:39:00.0", "0000:3b:00.0", "0000:57:00.0", "0000:59:00.0",
             "0000:5c:00.0", "0000:5e:00.0", "0000:b7:00.0", "0000:b9:00.0", "0000:bc:00.0", "0000:be:00.0",
             "0000:e0:00.0", "0000:e2:00.0", "0000:e5:00.0", "0000:e7:00.0"]
# dcgmi dmon -e 1009,1010 -d 1000, one second of gdsio -d 12 ... -I 0: {GPU: (PCITX, PCIRX)}; the
# rows the guide elides ("...") carry what their neighbours do
DCGMI_GPU12 = {0: (4712070210, 5237742827), 1: (435418, 637272), 11: (476420, 739272), 12: (528378278, 4721644934),
               13: (481604, 741403), 14: (474700, 736417), 15: (382261, 611617)}
DCGMI_GPU12.update({i: (476420, 739272) for i in range(2, 11)})
GPU12_BYTES = round(3.893747 * 2 ** 30)  # Throughput: 3.893747 GiB/sec over that second
# the 4 KiB random reads from GPU 10: GPU 0 holds the primary read buffer
DCGMI_GPU10 = {i: (185690, 61385) for i in range(16)}
DCGMI_GPU10.update({0: (108216883, 122481373), 9: (183268, 60918), 10: (22110153, 124205217)})
GPU10_BYTES = round(0.105713 * 2 ** 30)
PAIR = ["nvme2n1", "nvme3n1"]


class Clock(object):
    """time for gds_devhealth: the test moves it, so integration is exact and nothing waits."""

    def __init__(self):
        self.now = 0.0
        self.during = None

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        """``seconds`` pass in 10 ms steps, ``during`` called after each (the counter thread)."""
        for _ in range(int(round(seconds / 0.01))):
            self.now += 0.01
            if self.during is not None:
                self.during()


class FakeNvml(object):
    """pynvml's API for the DGX-2's 16 GPUs: byte counters (field values, as pynvml returns them:
    c_nvmlFieldValue_t with nvmlReturn and value.ullVal) when ``counters``, else only
    nvmlDeviceGetPcieThroughput (KB/s); GPM on the GPUs in ``gpm`` (their samples hold the bytes
    and ``clock``'s time when taken; the metrics are MiB/s between two samples, as NVML's)."""
    NVML_FI_DEV_PCIE_COUNT_TX_BYTES = pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES
    NVML_FI_DEV_PCIE_COUNT_RX_BYTES = pynvml.NVML_FI_DEV_PCIE_COUNT_RX_BYTES
    NVML_PCIE_UTIL_TX_BYTES = pynvml.NVML_PCIE_UTIL_TX_BYTES
    NVML_PCIE_UTIL_RX_BYTES = pynvml.NVML_PCIE_UTIL_RX_BYTES

    class _Obj(object):
        def __init__(self, **kw):
            self.__dict__.update(kw)

    NVML_GPM_METRIC_PCIE_TX_PER_SEC = pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC
    NVML_GPM_METRIC_PCIE_RX_PER_SEC = pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC

    class c_nvmlGpmMetricsGet_t(object):
        def __init__(self):
            self.metrics = [FakeNvml._Obj(metricId=0, nvmlReturn=0, value=0.0) for _ in range(4)]

    def __init__(self, counters=True, throughput=True, gpm=(), clock=None):
        self.counters, self.throughput, self.gpm, self.clock = counters, throughput, set(gpm), clock
        self.bytes = {i: [10 ** 12, 2 * 10 ** 12] for i in range(16)}  # [tx, rx] since the driver loaded
        self.rate_kb = {i: (0, 0) for i in range(16)}                   # (tx, rx) KB/s now
        self.live_samples = set()
        self.gpm_error = None

    def nvmlGpmQueryDeviceSupport(self, handle):
        return self._Obj(isSupportedDevice=int(handle in self.gpm))

    def nvmlGpmSampleAlloc(self):
        sample = self._Obj(handle=None)
        self.live_samples.add(id(sample))
        return sample

    def nvmlGpmSampleFree(self, sample):
        self.live_samples.remove(id(sample))

    def nvmlGpmSampleGet(self, handle, sample):
        sample.handle, sample.bytes, sample.time = handle, list(self.bytes[handle]), self.clock.now
        return sample

    def nvmlGpmMetricsGet(self, query):
        if self.gpm_error is not None:
            raise pynvml.NVMLError(self.gpm_error)
        first, second = query.sample1, query.sample2
        span = second.time - first.time
        for metric in query.metrics[:query.numMetrics]:
            which = 0 if metric.metricId == pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC else 1
            metric.value = (second.bytes[which] - first.bytes[which]) / span / 2 ** 20
        return query

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 16

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetPciInfo(self, handle):
        return self._Obj(busId=("0000" + DGX2_GPUS[handle]).encode())

    def nvmlDeviceGetFieldValues(self, handle, field_ids):
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for value, field in zip(values, field_ids):
            value.fieldId = field
            if not self.counters:
                value.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            # the counters wrap at 32 bits, as an H200's do
            value.value.ullVal = ctypes.c_ulonglong(
                self.bytes[handle][0 if field == pynvml.NVML_FI_DEV_PCIE_COUNT_TX_BYTES else 1] % 2 ** 32).value
        return values

    def nvmlDeviceGetPcieThroughput(self, handle, counter):
        if not self.throughput:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self.rate_kb[handle][0 if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES else 1]

    def move(self, dcgmi, sampler=None, steps=16):
        """The GPUs move ``dcgmi``'s bytes in ``steps`` equal parts, ``sampler`` reading the
        counters after each (as its thread does every few milliseconds)."""
        for _ in range(steps):
            for index, (tx, rx) in dcgmi.items():
                self.bytes[index][0] += tx // steps
                self.bytes[index][1] += rx // steps
            if sampler is not None:
                sampler.count()
        for index, (tx, rx) in dcgmi.items():  # what integer division left
            self.bytes[index][0] += tx % steps
            self.bytes[index][1] += rx % steps


@pytest.fixture(scope="module")
def dgx2(tmp_path_factory):
    import simtree
    root = simtree.build("dgx2", str(tmp_path_factory.mktemp("dgx2")))
    return discover(root + "/sys", root + "/proc")[0]


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(gds_devhealth, "time", fake)
    return fake


def one_job(fake, topology, gpu, moved, during, tmp, th=None, clock=None, **extra):
    """A job on md127 watched from begin to end; ``during`` makes the GPUs move their bytes."""
    health = HealthRun([], gpu_indices=[gpu], interval=3600, pynvml=fake, traffic=True)
    health.begin()
    watch = JobWatch(th or {}, str(tmp / "noproc"), str(tmp / "nosys"), topology, health)
    job = dict({"name": "nvme23 read", "gpu": gpu, "xfer_type": 0, "io_type": "read", "members": PAIR}, **extra)
    watch.begin(job)
    during(health)
    entry, checks = watch.end(job, {"bytes": moved, "throughput_gib_s": 1.0})
    health.end()
    return entry, {c["name"]: c for c in checks}


def test_guide_gpu12_read_bounces_through_gpu0(dgx2, tmp_path):
    fake = FakeNvml()
    entry, checks = one_job(fake, dgx2, 12, GPU12_BYTES, lambda h: fake.move(DCGMI_GPU12, h.sampler), tmp_path)
    by_index = {g["index"]: g for g in entry["gpus"]}
    assert len(by_index) == 16 and by_index[0]["source"] == COUNTERS
    assert (by_index[0]["tx_bytes"], by_index[0]["rx_bytes"]) == DCGMI_GPU12[0]
    assert by_index[12]["rx_bytes"] == 4721644934 and by_index[12]["bdf"] == "0000:e0:00.0"
    bounce = checks["bench: nvme23 read: bounce"]
    assert bounce["verdict"] == "WARN"  # the profile default
    assert bounce["actual"] == ("GPU0 (0000:34:00.0, PXB to nvme2n1, nvme3n1) received 5.24 GB, "
                                "125% of the bytes the job moved")
    assert "GPU12 (0000:e0:00.0, SYS to nvme2n1, nvme3n1) received 4.72 GB over PCIe, 113% of the 4.18 GB" \
        in bounce["detail"]


def test_guide_gpu10_random_reads_fail_when_the_profile_says_so(dgx2, tmp_path):
    fake = FakeNvml()
    _, checks = one_job(fake, dgx2, 10, GPU10_BYTES, lambda h: fake.move(DCGMI_GPU10, h.sampler), tmp_path,
                        th={"bounce_verdict": "FAIL"})
    bounce = checks["bench: nvme23 read: bounce"]
    assert bounce["verdict"] == "FAIL" and bounce["actual"].startswith("GPU0 (0000:34:00.0, PXB to nvme2n1, nvme3n1)")
    assert "108% of the bytes" in bounce["actual"]
    _, checks = one_job(fake, dgx2, 10, GPU10_BYTES, lambda h: fake.move(DCGMI_GPU10, h.sampler), tmp_path,
                        th={"bounce_share": 1.5})
    assert checks["bench: nvme23 read: bounce"]["verdict"] == "PASS"
    # the planner's non-affine job measures exactly this detour: named, and PASS whatever the profile
    _, checks = one_job(fake, dgx2, 10, GPU10_BYTES, lambda h: fake.move(DCGMI_GPU10, h.sampler), tmp_path,
                        th={"bounce_verdict": "FAIL"}, expect_bounce=True)
    bounce = checks["bench: nvme23 read: bounce"]
    assert bounce["verdict"] == "PASS" and bounce["actual"].startswith("GPU0 (0000:34:00.0, PXB")
    assert "non-affine pair" in bounce["expected"]


def test_counters_that_wrap_between_two_reads_are_unknown_not_wrong(dgx2, tmp_path, clock):
    """The counters wrap at 32 bits: GPU 12 reading 5.2 GB read only at the job's start and end
    (no read between them for a whole second) could have wrapped any number of times."""
    fake = FakeNvml()
    clock.now = 10.0

    def sparse(health):
        clock.now += 1.0
        fake.move(DCGMI_GPU12)

    entry, checks = one_job(fake, dgx2, 12, GPU12_BYTES, sparse, tmp_path, clock=clock)
    gpu12 = next(g for g in entry["gpus"] if g["index"] == 12)
    assert "rx_bytes" not in gpu12 and "a 32-bit wrap may be lost" in gpu12["unknown"]
    assert "up to 1000 ms" in gpu12["unknown"]
    assert checks["bench: nvme23 read: bounce"]["verdict"] == "SKIP"


def test_counters_read_often_add_up_across_their_wraps(dgx2, tmp_path, clock):
    """Read every 10 ms, the same 5.2 GB (the counter wraps once) add up to the byte."""
    fake = FakeNvml()
    clock.now = 10.0

    def often(health):
        for _ in range(64):
            clock.now += 0.01
            fake.move({i: (tx // 64, rx // 64) for i, (tx, rx) in DCGMI_GPU12.items()}, health.sampler, steps=1)

    entry, checks = one_job(fake, dgx2, 12, GPU12_BYTES, often, tmp_path, clock=clock)
    gpu12 = next(g for g in entry["gpus"] if g["index"] == 12)
    assert gpu12["rx_bytes"] == DCGMI_GPU12[12][1] // 64 * 64 > 2 ** 32
    assert checks["bench: nvme23 read: bounce"]["verdict"] == "WARN"


def test_affine_read_integrated_from_throughput_samples(dgx2, tmp_path, clock):
    """No byte counters on this GPU: nvmlDeviceGetPcieThroughput sampled every 0.5 s while GPU 2
    reads, as nvidia-smi dmon shows it (rxpci 8923 MB/s), integrated over the job's 2 s."""
    fake = FakeNvml(counters=False)

    def run(health):
        for index in range(16):
            fake.rate_kb[index] = (0, 2 * 1024) if index != 2 else (0, 8923 * 1024)
        for _ in range(4):
            clock.now += 0.5
            health.sampler.sample()
        for index in range(16):
            fake.rate_kb[index] = (0, 0)

    clock.now = 10.0
    moved = round(2 * 6.524658 * 2 ** 30)
    entry, checks = one_job(fake, dgx2, 2, moved, run, tmp_path, clock=clock)
    gpu2 = next(g for g in entry["gpus"] if g["index"] == 2)
    assert gpu2["source"] == THROUGHPUT and gpu2["rx_bytes"] == 2 * 8923 * 1024 * 1024
    bounce = checks["bench: nvme23 read: bounce"]
    assert bounce["verdict"] == "PASS" and bounce["actual"] == "no other GPU carried the data"
    assert "GPU2 (0000:39:00.0, PXB to nvme2n1, nvme3n1) received 18.71 GB over PCIe, 134%" in bounce["detail"]


def test_unsupported_or_missing_nvml_is_unknown_never_a_failure(dgx2, tmp_path):
    fake = FakeNvml(counters=False, throughput=False)
    entry, checks = one_job(fake, dgx2, 2, 10 ** 9, lambda h: None, tmp_path)
    bounce = checks["bench: nvme23 read: bounce"]
    assert bounce["verdict"] == "SKIP" and "not supported" in entry["gpus"][0]["unknown"]
    assert "PCIe byte counters: field 198: not supported" in entry["gpus"][0]["unknown"]

    class Broken(FakeNvml):
        def nvmlInit(self):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    entry, checks = one_job(Broken(), dgx2, 2, 10 ** 9, lambda h: None, tmp_path)
    assert checks["bench: nvme23 read: bounce"]["verdict"] == "SKIP"
    assert "Driver Not Loaded" in entry["gpus_unknown"] and entry["gpus"] == []


def test_link_class_from_the_matrix(dgx2):
    assert link_class(dgx2, 0, PAIR) == "PXB to nvme2n1, nvme3n1"
    assert link_class(dgx2, 12, PAIR) == "SYS to nvme2n1, nvme3n1"
    assert link_class({"matrix": {"GPU1": {"a": "PIX", "b": "PXB"}}}, 1, ["a", "b"]) == "PIX to a, PXB to b"
    assert link_class({}, 1, PAIR) is None


# gds_bench end to end: a pynvml module whose two GPUs' byte counters live in files the fake
# benchmark grows (GPU 1 receives what GPU 0 was asked for: a bounce)
FAKE_PYNVML = '''
import ctypes, os
NVML_FI_DEV_PCIE_COUNT_TX_BYTES = 197
NVML_FI_DEV_PCIE_COUNT_RX_BYTES = 198
class NVMLError(Exception):
    pass
class _O(object):
    def __init__(self, **kw):
        self.__dict__.update(kw)
class _Value(ctypes.Union):
    _fields_ = [("ullVal", ctypes.c_ulonglong)]
class c_nvmlFieldValue_t(ctypes.Structure):
    _fields_ = [("fieldId", ctypes.c_uint32), ("nvmlReturn", ctypes.c_uint), ("value", _Value)]
def _count(i, field):
    path = os.path.join(os.environ["FAKE_NVML_DIR"], "%d.%d" % (i, field))
    return int(open(path).read()) if os.path.exists(path) else 0
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetPciInfo(h): return _O(busId=b"00000000:%02x:00.0" % (0x18 + h))
def nvmlDeviceGetFieldValues(h, ids):
    out = (c_nvmlFieldValue_t * len(ids))()
    for v, f in zip(out, ids):
        v.fieldId, v.value.ullVal = f, _count(h, f)
    return out
'''


def test_module_names_the_bounce_gpu(tmp_path, monkeypatch):
    mod = tmp_path / "fake_pynvml"
    mod.mkdir()
    (mod / "pynvml.py").write_text(FAKE_PYNVML)
    monkeypatch.syspath_prepend(str(mod))
    monkeypatch.setenv("FAKE_NVML_DIR", str(tmp_path))
    record = {"io_type": "read", "bytes": 4 * 10 ** 9, "elapsed_s": 1.0, "throughput_gib_s": 3.7, "ops": 4000,
              "errors": 0, "verify_errors": 0, "path": {"mode": "nvfs"}}
    bench = tmp_path / "gdsbench"
    # the counters grow in steps a link can carry (a jump of gigabytes between two 10 ms reads cannot be bytes)
    bench.write_text("#!/bin/bash\nfor i in 1 2 3 4; do echo $((i * 1025000000)) > %s/1.198.new; "
                     "echo $((i * 1000000000)) > %s/0.198.new; mv %s/1.198.new %s/1.198; mv %s/0.198.new %s/0.198; "
                     "sleep 0.05; done\necho '%s'\n" % ((tmp_path,) * 6 + (json.dumps(record),)))
    bench.chmod(0o755)
    job = {"name": "r", "target": str(tmp_path / "data"), "gpu": 0, "io_type": "read", "duration": 1}
    topology = {"matrix": {"GPU0": {"nvme0n1": "SYS"}, "GPU1": {"nvme0n1": "PIX"}}}
    rc, result = run_module("gds_bench", {"binary": str(bench), "jobs": [dict(job, members=["nvme0n1"])],
                                          "udev_root": "", "topology": topology, "nvml_interval": 0.05})
    assert rc == 0, result
    bounce = next(c for c in result["checks"] if c["name"] == "bench: r: bounce")
    assert bounce["verdict"] == "WARN" and bounce["actual"].startswith("GPU1 (0000:19:00.0, PIX to nvme0n1) received 4.10 GB")
    gpus = result["results"][0]["watch"]["gpus"]
    assert [(g["index"], g["rx_bytes"], g["source"]) for g in gpus] == [(0, 4000000000, COUNTERS), (1, 4100000000, COUNTERS)]


def test_gpm_counts_across_any_gap_and_frees_its_samples(dgx2, tmp_path, clock):
    """GPM (Hopper and newer) first: the same second of GPU 12 reading with no read between the
    job's start and end (the byte counters would be unknown) comes out exact, the bounce named, no
    10 ms counter thread running, every GPM sample given back. GPU 0 has no GPM here: it falls
    back to its byte counters, read often enough."""
    fake = FakeNvml(gpm=set(range(1, 16)), clock=clock)
    clock.now = 10.0

    def run(health):
        for _ in range(64):
            clock.now += 1 / 64.0
            fake.move({i: (tx // 64, rx // 64) for i, (tx, rx) in DCGMI_GPU12.items()}, health.sampler, steps=1)

    health_seen = {}

    def during(health):
        health_seen["counting"] = health.sampler._counter_thread is not None
        clock.during = health.sampler.count  # the counter thread reads GPU 0 while a mark waits for GPM
        run(health)

    entry, checks = one_job(fake, dgx2, 12, GPU12_BYTES, during, tmp_path, clock=clock)
    by_index = {g["index"]: g for g in entry["gpus"]}
    assert by_index[12]["source"] == GPM and by_index[0]["source"] == COUNTERS
    assert abs(by_index[12]["rx_bytes"] - DCGMI_GPU12[12][1] // 64 * 64) <= 1
    assert abs(by_index[0]["rx_bytes"] - DCGMI_GPU12[0][1] // 64 * 64) <= 1
    assert checks["bench: nvme23 read: bounce"]["verdict"] == "WARN"
    assert checks["bench: nvme23 read: bounce"]["actual"].startswith("GPU0 (0000:34:00.0")
    assert "from %s and %s" % (GPM, COUNTERS) in checks["bench: nvme23 read: bounce"]["detail"]
    assert health_seen["counting"]  # GPU 0's counters need their thread
    assert fake.live_samples == set()

    # every GPU with GPM: one sample at each end of a whole second, and no counter thread
    fake = FakeNvml(gpm=range(16), clock=clock)

    def sparse(health):
        health_seen["counting"] = health.sampler._counter_thread is not None
        clock.now += 1.0
        fake.move(DCGMI_GPU12)

    entry, checks = one_job(fake, dgx2, 12, GPU12_BYTES, sparse, tmp_path, clock=clock)
    gpu12 = next(g for g in entry["gpus"] if g["index"] == 12)
    assert abs(gpu12["rx_bytes"] - DCGMI_GPU12[12][1]) <= 1 and gpu12["source"] == GPM
    assert not health_seen["counting"] and fake.live_samples == set()
    assert checks["bench: nvme23 read: bounce"]["verdict"] == "WARN"


def test_gpm_failing_during_the_job_is_unknown_with_the_reason(dgx2, tmp_path, clock):
    fake = FakeNvml(gpm=range(16), clock=clock)
    clock.now = 10.0

    def fails(health):
        clock.now += 1.0
        fake.move(DCGMI_GPU12)
        fake.gpm_error = pynvml.NVML_ERROR_GPU_IS_LOST

    entry, checks = one_job(fake, dgx2, 12, GPU12_BYTES, fails, tmp_path, clock=clock)
    gpu12 = next(g for g in entry["gpus"] if g["index"] == 12)
    assert "rx_bytes" not in gpu12 and gpu12["unknown"].startswith("GPM: nvmlGpmMetricsGet: ")
    assert "GPU is lost" in gpu12["unknown"]
    assert checks["bench: nvme23 read: bounce"]["verdict"] == "SKIP"
    assert fake.live_samples == set()


def test_no_source_names_all_three_reasons(dgx2, tmp_path):
    fake = FakeNvml(counters=False, throughput=False, gpm=())
    entry, _ = one_job(fake, dgx2, 2, 10 ** 9, lambda h: None, tmp_path)
    assert entry["gpus"][0]["unknown"].startswith("GPM: not supported on this GPU; PCIe byte counters: field 198")


# --------------------------------------------------------------------------------------------
# Every GPU at once: what each GPU carried of the job (a four-H200 run: each GPU 0.29-0.30 of the
# write bytes, an NVML sampler beside it)
# --------------------------------------------------------------------------------------------
def test_every_gpu_at_once_gives_each_gpus_bytes_and_share(dgx2, tmp_path):
    fake = FakeNvml()
    health = HealthRun([], gpu_indices=[0, 1, 2, 3], interval=3600, pynvml=fake, traffic=True)
    health.begin()
    watch = JobWatch({}, str(tmp_path / "noproc"), str(tmp_path / "nosys"), dgx2, health)
    job = {"name": "all GPUs at once seq_write", "xfer_type": 0, "io_type": "write", "jobs": [
        {"name": "g%d" % g, "gpu": g, "target": "/raid%d" % g, "members": PAIR} for g in range(4)]}
    watch.begin(job)
    total = 4 * 10 ** 9
    sent = {0: 0.30, 1: 0.29, 2: 0.30, 3: 0.11}  # a write: the GPUs send
    fake.move({g: (int(share * total), 1000) for g, share in sent.items()}, health.sampler)
    entry, checks = watch.end(job, {"bytes": total, "throughput_gib_s": 4.0})
    health.end()
    assert [(s["index"], s["bytes"], s["share"]) for s in entry["gpu_shares"]] == [
        (0, 1200000000, 0.3), (1, 1160000000, 0.29), (2, 1200000000, 0.3), (3, 440000000, 0.11)]
    assert len(entry["gpus"]) == 16 and not [c for c in checks if c["name"].endswith(": bounce")]  # no one GPU's bounce


def test_every_gpu_at_once_of_a_cpu_transfer_type_follows_no_gpu(dgx2, tmp_path):
    from ansible_collections.gds.commission.plugins.module_utils.measure.watch import job_gpus, watches_gpus
    job = {"name": "all", "xfer_type": 1, "jobs": [{"gpu": 0}, {"gpu": 1}]}
    assert job_gpus(job) == [] and not watches_gpus([job])
    job["xfer_type"] = 0
    assert job_gpus(job) == [0, 1] and watches_gpus([job]) and not watches_gpus([dict(job, skip="x")])
