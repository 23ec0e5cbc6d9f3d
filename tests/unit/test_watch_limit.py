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


def test_guide_pair_is_bound_by_its_two_x4_drives(dgx2):
    limit = path_limit(dgx2, 2, PAIR)
    assert limit["gb_s"] == 7.877 and limit["bound"] == "the drives' links"
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
    # 800k IOPS per drive at 4 KiB: 6.55 GB/s, again below the links
    assert spec_bytes({"metric": "iops", "value": 1600000}, {"io_size_bytes": 4096}) == 1600000 * 4096
    assert spec_bytes({"metric": "lat_us.p99", "value": 100}, {}) is None


def test_a_gpu_link_at_x4_bounds_the_path(dgx2):
    facts = with_link(dgx2, "0000:39:00.0", current_width=4)
    limit = path_limit(facts, 2, PAIR)
    assert limit["bound"] == "the GPU's link 0000:39:00.0" and limit["gb_s"] == 3.938


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
