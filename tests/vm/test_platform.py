"""cuFile configuration, IOMMU drop-in and the commissioning report of the guest."""
import json
import os
import sys
import shlex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

if os.path.join(ROOT, "collections") not in sys.path:  # the collection's code, as ansible_collections.*
    sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.gds.commission.plugins.module_utils.tune import cufile as gds_cufile  # noqa: E402

import vmctl  # noqa: E402  (tests/vm/conftest.py puts scripts/vm on the path)
from test_guest_links import rxe_stall  # noqa: E402

CUFILE = "/etc/cufile.json"
REPORTS = os.environ.get("GDS_REPORTS_DIR", os.path.join(ROOT, "reports"))


def test_cufile_json_valid_for_compat_mode(guest):
    f = guest.host.file(CUFILE)
    assert f.exists, "%s is missing" % CUFILE
    config = gds_cufile.loads(f.content_string, source=CUFILE)
    assert gds_cufile.validate(config) == []
    props = config.get("properties", {})
    assert props.get("allow_compat_mode") is True, "gds_mode compat needs properties.allow_compat_mode"
    assert props.get("use_pci_p2pdma") is False
    # strict JSON on disk: cuFile's own parser accepts comments, but the product writes none
    json.loads(f.content_string)


def _dropins(guest):
    out = guest.out("grep -l -i 'iommu' /etc/default/grub.d/*.cfg 2>/dev/null || true").split()
    return out


def test_iommu_dropin_present_and_sourced(guest):
    files = _dropins(guest)
    assert files, "no IOMMU drop-in in /etc/default/grub.d/"
    # grub-mkconfig sources them: each must be valid shell that sets a GRUB_CMDLINE_LINUX* variable
    for path in files:
        res = guest.host.run("sh -n %s" % path)
        assert res.rc == 0, "%s is not valid shell: %s" % (path, res.stderr)
        assert "GRUB_CMDLINE_LINUX" in guest.host.file(path).content_string


def _dropin_args(guest):
    """The kernel arguments the drop-ins add, as grub-mkconfig would see them."""
    script = ("GRUB_CMDLINE_LINUX=; GRUB_CMDLINE_LINUX_DEFAULT=; "
              "for f in /etc/default/grub.d/*.cfg; do . \"$f\"; done; "
              "echo $GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX_DEFAULT")
    return guest.out("sh -c %s" % shlex.quote(script)).split()


def test_iommu_args_in_grub_cfg(guest):
    """update-grub ran: the generated boot entry carries the drop-in's arguments."""
    args = [a for a in _dropin_args(guest) if "iommu" in a]
    assert args, "the grub.d drop-ins add no IOMMU argument"
    cfg = guest.host.file("/boot/grub/grub.cfg")
    assert cfg.exists, "no /boot/grub/grub.cfg: update-grub did not run after the drop-in was written"
    linux = [line.split() for line in cfg.content_string.splitlines() if line.strip().startswith("linux")]
    assert linux, "grub.cfg has no linux line"
    for arg in args:
        assert arg in linux[0], "%s missing from the first boot entry of grub.cfg: %s" % (arg, " ".join(linux[0]))


def test_report_written():
    path = os.path.join(REPORTS, "latest", "summary.json")
    assert os.path.exists(path), "%s missing: the commissioning report was not written" % path
    with open(path) as f:
        summary = json.load(f)
    host = summary["hosts"].get("gds-vm")
    assert host, "gds-vm not in %s" % path
    # the one degraded PCIe hop of the guest (test_guest_links.py) is its only failure
    failing = [c for c in host["checks"] if c["verdict"] not in ("PASS", "SKIP", "WARN") and not rxe_stall(c)]
    assert [c["name"] for c in failing] == ["pcie: link %s" % b for b in vmctl.topology()["degraded_links"]], failing
    assert host["verdict"] == "FAIL", host["verdict"]
    names = [c["name"] for c in host["checks"]]
    assert any(n.startswith("raid:") for n in names), names
    bench = [c for c in host["checks"] if c["name"].startswith("bench:")]
    assert bench, "no benchmark checks in the report"
    for want in ("raid1", "raid2"):
        assert any(want in c["name"] or want in json.dumps(c) for c in bench), (
            "no benchmark check for /%s: %s" % (want, [c["name"] for c in bench]))
    assert os.path.exists(os.path.join(REPORTS, "latest", "junit.xml"))
    assert os.path.exists(os.path.join(REPORTS, "latest", "report.html"))
