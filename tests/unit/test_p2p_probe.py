"""measure/p2p_probe.py: the kernel's answer for each provider and target, held against the
prediction. On a real kernel the QEMU guest runs it (tests/integration/test_guest_p2pdma.py); here a
plain file stands in for a provider's p2pmem/allocate, so the data always arrives and the judging,
the file rules and the bounds are what is tested."""
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.measure import p2p_probe

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "collections", "ansible_collections", "gds", "commission",
                     "roles", "gds_bench", "files", "bench", "gdsbench-nocuda")
PROVIDERS = ["0000:04:00.0", "0000:05:00.0", "0000:0c:00.0"]


@pytest.fixture(scope="module")
def gdsbench():
    if not os.access(BENCH, os.X_OK):
        pytest.skip("gdsbench-nocuda not built (make -C .../bench nocuda)")
    return os.path.abspath(BENCH)


def sysfs(tmp_path, providers=PROVIDERS):
    for bdf in providers:
        d = tmp_path / "sys" / "bus" / "pci" / "devices" / bdf / "p2pmem"
        d.mkdir(parents=True)
        (d / "allocate").write_bytes(b"\0" * (1 << 20))
    return str(tmp_path / "sys")


def topology(maps):
    return {"nvme": [{"name": "nvme1n1", "paths": [{"bdf": "0000:04:00.0"}]},
                     {"name": "nvme2n1", "paths": [{"bdf": "0000:05:00.0"}]}],
            "p2pdma": {"providers": PROVIDERS + ["0000:99:00.0"],  # the last publishes nothing here
                       "pairs": [{"provider": p, "client": c, "map": m, "reason": "r"}
                                 for (p, c), m in maps.items()]}}


def test_each_provider_and_target_is_judged_and_the_probe_file_is_gone(gdsbench, tmp_path):
    mount = tmp_path / "raid1"
    mount.mkdir()
    maps = {("0000:04:00.0", "0000:04:00.0"): "bus_address", ("0000:04:00.0", "0000:05:00.0"): "bus_address",
            ("0000:05:00.0", "0000:04:00.0"): "host_bridge", ("0000:05:00.0", "0000:05:00.0"): "refused",
            ("0000:0c:00.0", "0000:04:00.0"): "bus_address"}  # nvme2n1's pair with 0c unknown
    arrays = [{"mount": str(mount), "members": ["nvme1n1", "nvme2n1"], "label": "raid1"}]
    answers, checks = p2p_probe.probe(gdsbench, arrays, topology(maps), sysfs(tmp_path), 1 << 20, 30,
                                      kmsg=str(tmp_path / "no-kmsg"))
    by = {a["provider"]: a for a in answers}
    assert sorted(by) == PROVIDERS  # 0000:99:00.0 has no p2pmem/allocate
    assert all(a["moved"] and a["bytes"] == 1 << 20 and a["kernel_log"] is None for a in answers)
    assert [by[p]["predicted"] for p in PROVIDERS] == ["bus_address", "refused", "unknown"]  # the worst member
    verdicts = {c["name"]: c["verdict"] for c in checks}
    assert verdicts == {"p2pdma: raid1 into 0000:04:00.0": "PASS", "p2pdma: raid1 into 0000:05:00.0": "FAIL",
                        "p2pdma: raid1 into 0000:0c:00.0": "WARN"}
    assert os.listdir(str(mount)) == []  # the probe file and the gds-bench directory it made are removed


def test_a_file_of_the_same_name_that_is_not_the_probes_is_left_alone(gdsbench, tmp_path):
    target = tmp_path / "raid1" / "gds-bench"
    target.mkdir(parents=True)
    (target / p2p_probe.PROBE_FILE).write_bytes(b"x" * (2 << 20))  # someone's file: read, never removed
    arrays = [{"mount": str(tmp_path / "raid1"), "members": ["nvme1n1"], "label": "raid1"}]
    p2p_probe.probe(gdsbench, arrays, topology({}), sysfs(tmp_path, PROVIDERS[:1]), 1 << 20, 30)
    assert (target / p2p_probe.PROBE_FILE).exists()


def test_no_provider_or_no_target_is_a_skip_and_a_link_target_is_refused(gdsbench, tmp_path):
    _, checks = p2p_probe.probe(gdsbench, [{"mount": "/nonexistent"}], topology({}), str(tmp_path / "sys"))
    assert [(c["name"], c["verdict"]) for c in checks] == [("p2pdma: peer memory probe", "SKIP")]
    root = sysfs(tmp_path, PROVIDERS[:1])
    _, checks = p2p_probe.probe(gdsbench, [], topology({}), root)
    assert [c["verdict"] for c in checks] == ["SKIP"]
    (tmp_path / "elsewhere").mkdir()
    os.symlink(str(tmp_path / "elsewhere"), str(tmp_path / "link"))
    _, checks = p2p_probe.probe(gdsbench, [{"mount": str(tmp_path), "target": str(tmp_path / "link"), "label": "l"}],
                                topology({}), root)
    assert checks[0]["verdict"] == "ERROR" and "symbolic link" in checks[0]["detail"]
    assert os.listdir(str(tmp_path / "elsewhere")) == []
