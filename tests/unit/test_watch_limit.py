"""The limit of a GPU/array path from the PCI model (plugins/module_utils/measure/pathlimit.py) and the job's
measured / limit, on the simulated DGX-2 of the GDS guide (Gen3: x16 GPUs and switches, x4 drives)."""
import copy

import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.affinity import discover
from ansible_collections.gds.commission.plugins.module_utils.measure.pathlimit import link_bytes_per_s, path_limit, spec_bytes
from ansible_collections.gds.commission.plugins.module_utils.measure.watch import JobWatch

GUIDE_GPU2_GIB_S = 6.524658    # the guide, 4.1: gdsio -D /nvme23/gds_dir -d 2 ... -x 0 -I 0
PAIR = ["nvme2n1", "nvme3n1"]  # md127 of /nvme23, on the switch of GPUs 0-3


@pytest.fixture(scope="module")
def dgx2(tmp_path_factory):
    import simtree
    root = simtree.build("dgx2", str(tmp_path_factory.mktemp("dgx2")))
    facts, _ = discover(root + "/sys", root + "/proc")
    return facts


def with_link(facts, bdf, **state):
    facts = copy.deepcopy(facts)
    for link in facts["pcie_links"]:
        if link["bdf"] == bdf:
            link.update(state)
    return facts


@pytest.mark.parametrize("speed,width,gb_s", [(32.0, 16, 63.015), (16.0, 4, 7.877), (8.0, 4, 3.938),
                                              (2.5, 1, 0.25), (5.0, 8, 4.0), (64.0, 16, 121.0)])
def test_link_rates_with_their_encoding(speed, width, gb_s):
    assert round(link_bytes_per_s(speed, width) / 1e9, 3) == gb_s
    assert link_bytes_per_s(None, 16) is None and link_bytes_per_s(8.0, None) is None


@pytest.mark.parametrize("speed,width", [(float("nan"), 16), ("16", 4), (16.0, -23), (16.0, float("nan")),
                                         (16.0, "16"), (16.0, True), (16.0, 0), (16.0, 10 ** 6), (True, 16)])
def test_a_link_state_that_is_no_rate_or_lane_count_has_no_rate(speed, width):
    """NaN, text or a negative width gave -23.6 GB/s or a raw ValueError in a SKIP's text."""
    assert link_bytes_per_s(speed, width) is None


def test_a_gpu_link_of_no_lane_count_is_an_unknown_limit_naming_why(dgx2):
    for width in (float("nan"), -23, "x16"):
        limit = path_limit(with_link(dgx2, "0000:39:00.0", current_width=width, expected_width=width), 2, PAIR)
        assert "bytes_per_s" not in limit and "0000:39:00.0" in limit["unknown"], limit


@pytest.mark.parametrize("value", [float("nan"), "6.5", -1, True, None, 0])
def test_a_drive_spec_that_is_no_figure_is_no_spec(value):
    assert spec_bytes({"metric": "throughput_gib_s", "value": value}, {}) is None
    assert spec_bytes({"metric": "iops", "value": 1000}, {"io_size_bytes": value}) is None


def test_guide_pair_is_bound_by_its_two_x4_drives(dgx2):
    limit = path_limit(dgx2, 2, PAIR)
    assert limit["gb_s"] == 7.877 and limit["bound"] == "the drives' links"
    assert limit["bottleneck"] == ["0000:2e:00.0", "0000:2f:00.0"]  # each drive's x4 link
    assert [d["slowest"]["width"] for d in limit["drives"]] == [4, 4]
    assert limit["gpu"]["slowest"]["width"] == 16 and limit["gpu"]["slowest"]["gb_s"] == 15.754
    assert "note" not in limit  # GPU and drives meet below one switch: nothing unmodelled
    # the guide's 6.52 GiB/s is 89 % of what the two drives' links carry
    assert round(GUIDE_GPU2_GIB_S * 2 ** 30 / limit["bytes_per_s"], 3) == 0.889


def test_drive_spec_from_the_profile_lowers_the_limit(dgx2):
    """The guide: 'each SSD is configured with around 3.4GB/sec large read performance'."""
    spec = spec_bytes({"metric": "throughput_gib_s", "value": 2 * 3.4e9 / 2 ** 30}, {})
    limit = path_limit(dgx2, 2, PAIR, spec_bytes_per_s=spec)
    assert limit["gb_s"] == 6.8 and limit["bound"] == "the drives' spec" and limit["spec_gb_s"] == 6.8
    assert limit["bottleneck"] == []  # no link bounds it
    # 800k IOPS per drive at 4 KiB: 6.55 GB/s, again below the links
    assert spec_bytes({"metric": "iops", "value": 1600000}, {"io_size_bytes": 4096}) == 1600000 * 4096
    assert spec_bytes({"metric": "lat_us.p99", "value": 100}, {}) is None


def test_a_gpu_link_at_x4_bounds_the_path(dgx2):
    facts = with_link(dgx2, "0000:39:00.0", current_width=4)
    limit = path_limit(facts, 2, PAIR)
    assert limit["bound"] == "the GPU's link 0000:39:00.0" and limit["gb_s"] == 3.938
    assert limit["bottleneck"] == ["0000:39:00.0"]


def test_idle_gpu_link_counts_at_its_speed_under_load(dgx2):
    idle = with_link(dgx2, "0000:39:00.0", current_speed_gts=2.5)  # trained down when idle
    limit = path_limit(idle, 2, PAIR)
    assert limit["gpu"]["slowest"]["gb_s"] == 15.754 and "expected speed" in limit["gpu"]["slowest"]["note"]
    slow = path_limit(idle, 2, PAIR, gpu_load={"0000:39:00.0": {"max_gen_seen": 1}})
    assert slow["bound"] == "the GPU's link 0000:39:00.0" and slow["gb_s"] == 4.0  # Gen1 x16 under load


def test_a_shared_upstream_link_carries_both_drives(dgx2):
    """GPU 12 is on another socket (SYS): the drives' data crosses their switch's upstream link;
    trained at x4 it carries one drive's worth for both."""
    facts = with_link(dgx2, "0000:2c:00.0", current_width=4)
    limit = path_limit(facts, 12, PAIR)
    assert limit["bound"] == "a link the drives share, 0000:2c:00.0" and limit["gb_s"] == 3.938
    assert limit["bottleneck"] == ["0000:2c:00.0"]
    assert "root complex" in limit["note"]  # the link between sockets is not modelled
    assert path_limit(dgx2, 12, PAIR)["gb_s"] == 7.877


def test_unknown_limits_say_why(dgx2):
    assert "vda" in path_limit(dgx2, 2, ["vda"])["unknown"]
    assert "GPU 99" in path_limit(dgx2, 99, PAIR)["unknown"]
    assert path_limit(dgx2, 2, [])["unknown"] == "no drive known for this job"
    broken = with_link(dgx2, "0000:2e:00.0", current_width=None, expected_width=None)
    assert "0000:2e:00.0" in path_limit(broken, 2, PAIR)["unknown"]
    assert path_limit({"pcie_links": dgx2["pcie_links"]}, 2, PAIR)["unknown"].startswith("drive nvme2n1")
    assert path_limit({}, 2, PAIR)["unknown"] == "no PCIe links in the topology facts"  # a simulated node


def watched(facts, th, throughput=GUIDE_GPU2_GIB_S, xfer_type=0, tmp=None):
    watch = JobWatch(th, str(tmp / "noproc"), str(tmp / "nosys"), facts)
    job = {"name": "nvme23 seq_read", "gpu": 2, "xfer_type": xfer_type, "members": PAIR, "io_type": "read"}
    watch.begin(job)
    entry, checks = watch.end(job, {"throughput_gib_s": throughput})
    return entry, {c["name"]: c for c in checks}


def test_job_records_limit_and_fraction_and_the_optional_threshold(dgx2, tmp_path):
    entry, checks = watched(dgx2, {}, tmp=tmp_path)
    assert entry["fraction"] == 0.8894 and entry["limit"]["gb_s"] == 7.877
    assert "bench: nvme23 seq_read: path_fraction" not in checks  # off by default
    _, checks = watched(dgx2, {"path_fraction_min": 0.9}, tmp=tmp_path)
    fraction = checks["bench: nvme23 seq_read: path_fraction"]
    assert fraction["verdict"] == "FAIL" and "limit 7.877 GB/s (the drives' links)" in fraction["detail"]
    _, checks = watched(dgx2, {"path_fraction_min": 0.88}, tmp=tmp_path)
    assert checks["bench: nvme23 seq_read: path_fraction"]["verdict"] == "WARN"  # within 5 %
    _, checks = watched(dgx2, {"path_fraction_min": 0.8}, tmp=tmp_path)
    assert checks["bench: nvme23 seq_read: path_fraction"]["verdict"] == "PASS"
    _, checks = watched({}, {"path_fraction_min": 0.8}, tmp=tmp_path)
    assert checks["bench: nvme23 seq_read: path_fraction"]["verdict"] == "SKIP"
    # a CPU transfer type's data ends in host memory: the drives' side only, up to the root complex
    entry, _ = watched(dgx2, {}, xfer_type=1, tmp=tmp_path)
    assert entry["limit"]["gpu"] is None and "host memory" in entry["limit"]["note"]


# --------------------------------------------------------------------------------------------
# Any PCI block device; every GPU at once
# --------------------------------------------------------------------------------------------
from ansible_collections.gds.commission.plugins.module_utils.measure.concurrency import (  # noqa: E402
    concurrency_entry, concurrent_limit,
)


def facts_of(tmp_path_factory, fixture):
    import simtree
    root = simtree.build(fixture, str(tmp_path_factory.mktemp("node")))
    facts, _ = discover(root + "/sys", root + "/proc")
    return facts


@pytest.fixture(scope="module")
def rented_vm(tmp_path_factory):
    return facts_of(tmp_path_factory, "cloud-vm-2gpu")


def test_a_virtio_disk_has_a_path_whose_unknown_rate_is_named(rented_vm):
    """The rented VM's data disk is a virtio function without link files: its path is found (the
    disk's function, the GPU, the root complex between them) and its rate is unknown, saying
    which function and why, never an invented figure."""
    limit = path_limit(rented_vm, 0, ["vda"])
    assert "bytes_per_s" not in limit and limit["root_complex"] == ["pci0000:00"]
    assert limit["unknown"].startswith("link state unknown at 0000:00:01.0")
    assert "are missing: no PCIe link is shown" in limit["unknown"] and "not an NVMe drive" not in limit["unknown"]


def test_a_disk_behind_an_hba_is_bound_by_the_hba_link(tmp_path_factory):
    from test_topology import scsi_vm
    facts = facts_of(tmp_path_factory, scsi_vm())
    limit = path_limit(facts, 0, ["sda"])
    # the HBA's Gen3 x4 link (simtree's default for other functions), below its root port; the GPU
    # on the root bus: the path crosses the root complex, which is named
    assert limit["gb_s"] == 3.938 and limit["bound"] == "the drives' links"
    assert limit["drives"] == [{"name": "sda", "bdf": "0000:03:00.0", "slowest": {
        "bdf": "0000:03:00.0", "gen": 3, "width": 4, "gb_s": 3.938, "note": None}}]
    assert limit["root_complex"] == ["pci0000:00"] and "pci0000:00" in limit["note"]


def test_every_gpu_on_one_array_is_bound_by_the_drives_they_share(dgx2):
    """GPUs 0-3 reading md127 (nvme2n1, nvme3n1) at once: each alone could take the two drives'
    7.877 GB/s; together the drives' x4 links carry it once, and the limit says which link."""
    parts = [{"name": "gpu%d" % g, "gpu": g, "drives": PAIR} for g in (0, 1, 2, 3)]
    limit = concurrent_limit(dgx2, parts)
    assert limit["sum_gb_s"] == 4 * 7.877 and limit["gb_s"] == 7.877
    assert limit["bound"].startswith("a link the GPUs share, NVMe controller 0000:2e:00.0: 3.938 GB/s")
    shared = {e["element"]: e for e in limit["shared"]}
    assert shared["0000:2e:00.0"]["jobs"] == ["gpu0", "gpu1", "gpu2", "gpu3"] and shared["0000:2e:00.0"]["demand_gb_s"] == 15.754
    # GPUs 0 and 1 share their switch's upstream link (x16: not the bound)
    assert shared["0000:32:00.0"]["jobs"] == ["gpu0", "gpu1"] and shared["0000:32:00.0"]["gb_s"] == 15.754


def test_every_gpu_on_its_own_array_shares_nothing(dgx2):
    parts = [{"name": "gpu0", "gpu": 0, "drives": PAIR}, {"name": "gpu4", "gpu": 4, "drives": ["nvme4n1", "nvme5n1"]}]
    limit = concurrent_limit(dgx2, parts)
    assert limit["gb_s"] == 2 * 7.877 and limit["shared"] == [] and limit["bound"].startswith("each GPU's own path")


def test_two_gpus_on_the_rented_vm_share_the_virtio_function_and_the_root_complex(rented_vm):
    parts = [{"name": "gpu%d vda" % g, "gpu": g, "drives": ["vda"]} for g in (0, 1)]
    limit = concurrent_limit(rented_vm, parts)
    assert limit["unknown"].startswith("the path of gpu0 vda, gpu1 vda: link state unknown at 0000:00:01.0")
    shared = {e["element"]: e for e in limit["shared"]}
    assert set(shared) == {"0000:00:01.0", "pci0000:00"}
    assert shared["0000:00:01.0"]["gb_s"] is None and "no PCIe link is shown" in shared["0000:00:01.0"]["note"]
    assert shared["pci0000:00"]["what"] == "root complex (host bridge pci0000:00)"


def test_the_aggregate_per_affinity_group_and_per_root_port(dgx2):
    """GPUs 0, 1 (group 1) and 4 (group 2) at once: the aggregate against their singles, per group
    and per root port, each with the limit of its part."""
    subs = [{"name": "gpu0 nvme23", "gpu": 0, "members": PAIR, "array": "nvme23", "single": "g0"},
            {"name": "gpu1 nvme23", "gpu": 1, "members": PAIR, "array": "nvme23", "single": "g1"},
            {"name": "gpu4 nvme45", "gpu": 4, "members": ["nvme4n1", "nvme5n1"], "array": "nvme45", "single": "g4"}]
    record = {"throughput_gib_s": 12.0, "jobs": [{"throughput_gib_s": 3.5}, {"throughput_gib_s": 3.0},
                                                 {"throughput_gib_s": 5.5}]}
    records = {"g0": {"throughput_gib_s": 6.5}, "g1": {"throughput_gib_s": 6.4}, "g4": {"throughput_gib_s": 6.1}}
    entry = concurrency_entry({"jobs": subs}, record, records, dgx2)
    assert (entry["aggregate_gib_s"], entry["singles_gib_s"], entry["scaling"]) == (12.0, 19.0, round(12 / 19.0, 4))
    groups = {g["key"]: g for g in entry["groups"]}
    assert groups["affinity group 1"]["gpus"] == [0, 1] and groups["affinity group 1"]["aggregate_gib_s"] == 6.5
    assert groups["affinity group 1"]["singles_gib_s"] == 12.9 and groups["affinity group 1"]["limit_gb_s"] == 7.877
    assert groups["affinity group 1"]["bound"].startswith("a link the GPUs share, NVMe controller")
    assert groups["affinity group 2"]["limit_gb_s"] == 7.877
    ports = {p["key"]: p for p in entry["root_ports"]}
    assert set(ports) == {"root port 0000:2b:00.0", "root port 0000:4e:00.0"}
    assert ports["root port 0000:2b:00.0"]["gpus"] == [0, 1]
    # a single that did not complete: no sum, said why
    entry = concurrency_entry({"jobs": subs}, record, {"g0": records["g0"]}, dgx2)
    assert entry["singles_gib_s"] is None and entry["scaling"] is None and "g1 did not complete" in entry["unknown"]


def test_a_concurrent_jobs_watch_takes_the_limit_of_the_links_they_share(dgx2, tmp_path):
    watch = JobWatch({"path_fraction_min": 0.5}, str(tmp_path / "noproc"), str(tmp_path / "nosys"), dgx2)
    job = {"name": "all", "xfer_type": 0, "io_type": "read", "members": PAIR,
           "jobs": [{"name": "gpu%d" % g, "gpu": g, "members": PAIR} for g in (0, 1, 2, 3)]}
    watch.begin(job)
    entry, checks = watch.end(job, {"throughput_gib_s": 6.5})
    assert entry["limit"]["gb_s"] == 7.877 and entry["limit"]["bound"].startswith("a link the GPUs share")
    assert entry["fraction"] == round(6.5 * 2 ** 30 / 7.877e9, 4)
    assert {c["name"]: c["verdict"] for c in checks}["bench: all: path_fraction"] == "PASS"
