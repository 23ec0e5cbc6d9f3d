"""AER counters read before and after the benchmark, and the ``pcie: aer <bdf>`` checks."""
import copy
import os

import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.health import aer_checks, read_aer

ROOT_PORT, NVME, GPU = "0000:00:01.0", "0000:01:00.0", "0000:00:02.0"
FIXTURE = {
    "host_bridges": {"0000:00": 0},
    "bridges": {ROOT_PORT: 0x01},
    "gpus": {"bdfs": [GPU]},
    "nvme": [{"bdf": NVME, "ctrl": "nvme0"}],
    "proc": {"mounts": "/dev/sda1 / ext4 rw 0 0\n"},
}
BDFS = [ROOT_PORT, NVME, GPU]


def node(sim_node, aer=None):
    fixture = copy.deepcopy(FIXTURE)
    fixture["aer"] = aer or {}
    root = sim_node(fixture)
    return os.path.join(root, "sys")


def add_errors(sysfs, bdf, name, count):
    """Raise one counter as the kernel would: the named line and the TOTAL_ERR_* line, or the
    single number of an aer_rootport_total_err_* file."""
    path = os.path.join(sysfs, "bus", "pci", "devices", bdf, name)
    lines = open(path).read().splitlines()
    if len(lines) == 1:
        lines = [str(int(lines[0]) + count)]
    else:
        for index in (1, len(lines) - 1):
            label, value = lines[index].split()
            lines[index] = "%s %d" % (label, int(value) + count)
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def test_read_aer_totals_and_root_port_counters(sim_node):
    sysfs = node(sim_node, {NVME: {"correctable": 7, "nonfatal": 2, "fatal": 1},
                            ROOT_PORT: {"rootport_correctable": 9}, GPU: None})
    counters = read_aer(sysfs, BDFS)
    assert counters[NVME] == {"correctable": 7, "nonfatal": 2, "fatal": 1, "rootport_correctable": None,
                              "rootport_nonfatal": None, "rootport_fatal": None}
    assert counters[ROOT_PORT] == {"correctable": 0, "nonfatal": 0, "fatal": 0, "rootport_correctable": 9,
                                   "rootport_nonfatal": 0, "rootport_fatal": 0}
    assert set(counters[GPU].values()) == {None}  # no AER capability: no files


def test_no_new_errors_pass(sim_node):
    sysfs = node(sim_node, {NVME: {"correctable": 7, "fatal": 1}})
    before = read_aer(sysfs, BDFS)
    checks = aer_checks(before, read_aer(sysfs, BDFS), 10)
    assert [(c["name"], c["verdict"]) for c in checks] == [
        ("pcie: aer " + b, "PASS") for b in (ROOT_PORT, GPU, NVME)]


@pytest.mark.parametrize("bdf, name, count, verdict, detail", [
    (NVME, "aer_dev_fatal", 1, "FAIL", "0000:01:00.0 aer_dev_fatal +1"),
    (NVME, "aer_dev_nonfatal", 3, "FAIL", "0000:01:00.0 aer_dev_nonfatal +3"),
    (NVME, "aer_dev_correctable", 11, "WARN", "0000:01:00.0 aer_dev_correctable +11 (limit 10)"),
    (NVME, "aer_dev_correctable", 10, "PASS", None),
    (ROOT_PORT, "aer_rootport_total_err_fatal", 1, "FAIL", "0000:00:01.0 aer_rootport_total_err_fatal +1"),
    (ROOT_PORT, "aer_rootport_total_err_nonfatal", 2, "FAIL", "0000:00:01.0 aer_rootport_total_err_nonfatal +2"),
    (ROOT_PORT, "aer_rootport_total_err_cor", 50, "WARN", "0000:00:01.0 aer_rootport_total_err_cor +50 (limit 10)"),
])
def test_errors_during_the_run(sim_node, bdf, name, count, verdict, detail):
    sysfs = node(sim_node, {NVME: {"correctable": 4}})
    before = read_aer(sysfs, BDFS)
    add_errors(sysfs, bdf, name, count)
    checks = {c["name"]: c for c in aer_checks(before, read_aer(sysfs, BDFS), 10)}
    assert checks["pcie: aer " + bdf]["verdict"] == verdict
    assert checks["pcie: aer " + bdf].get("detail") == detail
    others = [c["verdict"] for n, c in checks.items() if n != "pcie: aer " + bdf]
    assert set(others) == {"PASS"}


def test_without_counters_skip_and_a_reset_counter_counts_what_it_shows(sim_node):
    sysfs = node(sim_node, {GPU: None, NVME: {"fatal": 5}})
    before = read_aer(sysfs, BDFS)
    after = read_aer(sysfs, BDFS)
    after[NVME]["fatal"] = 1  # the device was removed and added again: counting restarted
    checks = {c["name"]: c for c in aer_checks(before, after, 0)}
    assert checks["pcie: aer " + GPU]["verdict"] == "SKIP"
    assert "no AER counters" in checks["pcie: aer " + GPU]["detail"]
    assert checks["pcie: aer " + NVME]["verdict"] == "FAIL"
    assert "aer_dev_fatal +1" in checks["pcie: aer " + NVME]["detail"]


def test_malformed_counter_file_is_none_not_a_traceback(sim_node):
    sysfs = node(sim_node)
    with open(os.path.join(sysfs, "bus", "pci", "devices", NVME, "aer_dev_fatal"), "w") as handle:
        handle.write("garbage\n")
    assert read_aer(sysfs, [NVME])[NVME]["fatal"] is None
    assert read_aer(sysfs, ["0000:99:00.0"])["0000:99:00.0"]["fatal"] is None
