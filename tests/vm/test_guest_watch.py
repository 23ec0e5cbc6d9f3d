"""What the watch of each benchmark job saw on the guest's md arrays, under a real kernel: every
job on an array read /proc/diskstats for exactly that array's members (sysfs slaves, or the
members the facts name for an array created in this run), each member took I/O of the job's
direction, and `bench: <job>: drive load` passes. Members are compared by PCI address: this
module runs again after the guest rebooted, and the nvme driver probes controllers in parallel,
so a drive's name (nvme0n1, nvme1n1) may differ from the run that wrote the report.

The converge writes <reports>/latest/gds-vm.json (see test_guest_links.py).
"""
from test_guest_links import _host_report


def _watched(doc):
    return [r for r in doc.get("bench") or [] if isinstance(r.get("watch"), dict) and r["watch"].get("drives")]


def _pci_address(guest, disk):
    """The PCI function under a block device now (/sys/block/<disk>/device is its controller)."""
    return guest.out('basename "$(readlink -f /sys/block/%s/device/device)"' % disk).strip()


def test_every_array_job_watched_its_members(guest):
    doc = _host_report()
    checks = {c["name"]: c for c in doc["checks"]}
    arrays = [tuple(sorted(_pci_address(guest, m) for m in a["members"]))
              for a in guest.mdstat().values() if a["level"] == "raid0"]
    jobs = _watched(doc)
    assert jobs, "no benchmark job recorded a drive load: %s" % [r.get("name") for r in doc.get("bench") or []]
    for job in jobs:
        watch, record = job["watch"], job["record"]
        names = tuple(sorted(d["name"] for d in watch["drives"]))
        addresses = tuple(sorted(str(d.get("bdf")) for d in watch["drives"]))
        assert addresses in arrays, "%s watched %s (%s), which is no RAID0 of /proc/mdstat: %s" % (
            job["name"], names, addresses, arrays)
        key = "write_bytes" if record.get("io_type") in ("write", "randwrite") else "read_bytes"
        for drive in watch["drives"]:
            assert drive[key] > 0, "%s: %s took no %s: %s" % (job["name"], drive["name"], key, drive)
            print("%s: %s (%s) %s %d, %s IOPS, await %s ms, util %s%% (from %s)" % (
                job["name"], drive["name"], drive.get("bdf"), key, drive[key],
                drive.get("w_s") if key == "write_bytes" else drive.get("r_s"),
                drive.get("w_await_ms") if key == "write_bytes" else drive.get("r_await_ms"),
                drive.get("util_pct"), watch.get("drives_source")))
        # the members moved at least the bytes the benchmark counted in its timed window
        assert sum(d[key] for d in watch["drives"]) >= 0.9 * record["bytes"], (job["name"], watch["drives"], record["bytes"])
        load = checks["bench: %s: drive load" % job["name"]]
        assert load["verdict"] in ("PASS", "WARN"), load  # WARN: an emulated drive may lag its peer
        limit = watch.get("limit") or {}
        print("%s: path limit %s" % (job["name"], limit.get("unknown") or "%s GB/s (%s), fraction %s"
                                     % (limit.get("gb_s"), limit.get("bound"), watch.get("fraction"))))
