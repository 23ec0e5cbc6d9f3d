"""The nvme_raid report checks (gds_raid.raid_checks), one case at a time, on plans built by the
planner from small topologies."""
import pytest

from ansible_collections.gds.commission.plugins.module_utils.hw.procfs import parse_mdstat, parse_mounts
from ansible_collections.gds.commission.plugins.module_utils.tune.raid import RaidError, desired_arrays, existing_arrays, plan, raid_checks

FACTS = {"nvme": [{"name": "nvme0n1", "switch": "s1"}, {"name": "nvme1n1", "switch": "s1"},
                  {"name": "nvme2n1", "switch": "s2"}, {"name": "nvme3n1", "switch": "s2"}],
         "groups": [{"id": 1, "gpus": [0, 1], "nvme": ["nvme0n1", "nvme1n1"]},
                    {"id": 2, "gpus": [2, 3], "nvme": ["nvme2n1", "nvme3n1"]}]}
ONE_BIG = "md1 : active raid0 nvme3n1[3] nvme2n1[2] nvme1n1[1] nvme0n1[0]\n      100 blocks super 1.2 512k chunks\n"
PER_GROUP = ("md126 : active raid0 nvme3n1[1] nvme2n1[0]\n      100 blocks super 1.2 512k chunks\n\n"
             "md127 : active raid0 nvme1n1[1] nvme0n1[0]\n      100 blocks super 1.2 512k chunks\n")
PER_GROUP_MOUNTS = "/dev/md127 /raid1 ext4 rw 0 0\n/dev/md126 /raid2 ext4 rw 0 0\n"


def make_plan(mdstat="", mounts="", facts=FACTS, **flags):
    existing = existing_arrays(parse_mdstat(mdstat), parse_mounts(mounts))
    return plan(desired_arrays(facts), existing, mounts=parse_mounts(mounts), topology=facts, **flags)


def by_name(checks):
    return {c["name"]: c for c in checks}


def test_p2pdma_with_md_raid_present_fails():
    checks = raid_checks(make_plan(ONE_BIG), ["/dev/md1"], p2pdma=True, run_mode="plan_only")
    first = checks[0]
    assert (first["name"], first["verdict"], first["actual"]) == ("raid: md RAID with P2PDMA", "FAIL", "/dev/md1")
    assert first["expected"] == "no md RAID (gds_mode p2pdma)"
    assert first["detail"].startswith("NVIDIA does not support GDS P2PDMA on md RAID")
    assert "raid: plan" not in by_name(checks)


def test_p2pdma_without_md_raid_skips_and_plans_only():
    checks = raid_checks(make_plan(), [], p2pdma=True, run_mode="plan_only")
    assert (checks[0]["verdict"], checks[0]["actual"]) == ("SKIP", "none")
    assert [(c["verdict"], c["actual"]) for c in checks[1:]] == [("SKIP", "planned, not applied")] * 2


@pytest.mark.parametrize("verdict", ["WARN", "FAIL"])
def test_refused_plan_takes_the_refused_verdict(verdict):
    checks = by_name(raid_checks(make_plan(ONE_BIG), ["/dev/md1"], refused_verdict=verdict))
    assert checks["raid: plan"]["verdict"] == verdict and checks["raid: plan"]["actual"] == "refused"
    assert "stopping md1 destroys its data and allow_destroy is false" in checks["raid: plan"]["detail"]
    array = checks["raid: raid1 (GPUs 0,1)"]
    assert (array["verdict"], array["actual"], array["expected"]) == ("SKIP", "refused (see raid: plan)",
                                                                       "nvme0n1+nvme1n1")
    assert "allow_destroy is false" in array["detail"]


def test_refused_verdict_must_be_warn_or_fail():
    with pytest.raises(RaidError, match="refused_verdict"):
        raid_checks(make_plan(ONE_BIG), [], refused_verdict="PASS")


def test_disabled():
    checks = raid_checks({}, [], group_by="switch", run_mode="disabled")
    assert checks == [{"name": "raid: plan", "verdict": "SKIP", "expected": "one RAID0 per PCIe switch",
                       "actual": "disabled",
                       "detail": "regrouping is turned off (enabled=false); nothing was planned or checked",
                       "area": "raid"}]


def test_no_data_drives():
    facts = {"nvme": [{"name": "nvme0n1", "system": True}],
             "groups": [{"id": 1, "gpus": [0], "nvme": ["nvme0n1"]}]}
    checks = raid_checks(make_plan(facts=facts), [])
    assert [(c["name"], c["verdict"], c["actual"], c["detail"]) for c in checks] == [
        ("raid: plan", "SKIP", "nothing to plan", "no data drive in any affinity group")]


def test_plan_applied():
    the_plan = make_plan(ONE_BIG, allow_destroy=True)
    checks = by_name(raid_checks(the_plan, [], run_mode="apply", changed=True))
    assert (checks["raid: plan"]["verdict"], checks["raid: plan"]["actual"]) == ("PASS", "applied")
    assert checks["raid: raid2 (GPUs 2,3)"]["actual"] == "created /dev/md/raid2 at /raid2"
    assert checks["raid: raid2 (GPUs 2,3)"]["verdict"] == "PASS"
    assert "detail" not in checks["raid: raid2 (GPUs 2,3)"]


def test_plan_unchanged():
    the_plan = make_plan(PER_GROUP, PER_GROUP_MOUNTS)
    checks = by_name(raid_checks(the_plan, ["/dev/md126", "/dev/md127"], run_mode="apply", changed=False))
    assert (checks["raid: plan"]["verdict"], checks["raid: plan"]["actual"]) == ("PASS", "in place")
    assert checks["raid: raid1 (GPUs 0,1)"]["actual"] == "kept md127 at /raid1"


def test_check_mode_warns_about_what_would_change():
    checks = by_name(raid_checks(make_plan(ONE_BIG, allow_destroy=True), [], run_mode="check"))
    assert (checks["raid: plan"]["verdict"], checks["raid: plan"]["actual"]) == ("WARN", "would change (check mode)")
    assert checks["raid: raid1 (GPUs 0,1)"]["actual"] == "would be created"


def test_simulated_node_only_plans():
    checks = by_name(raid_checks(make_plan(), [], run_mode="simulated"))
    assert (checks["raid: plan"]["verdict"], checks["raid: plan"]["actual"]) == ("SKIP", "planned (simulated node)")
    assert "create raid1 from nvme0n1,nvme1n1 at /raid1 for GPUs 0,1" in checks["raid: plan"]["detail"]
    assert checks["raid: raid1 (GPUs 0,1)"]["actual"] == "planned, not applied"
