"""ACS on the guest's bridges, read back with setpci as an admin would."""
import pytest

# The guest's bridges on the paths of the grouped drives: the root port above each switch has an
# ACS capability (QEMU's pcie-root-port, at 0x148); the x3130 switch ports have none.


def _uplinks(topo):
    return sorted(sw["root_port"] for sw in topo["switches"])


@pytest.mark.parametrize("which", [0, 1])
def test_acs_cleared_on_switch_uplinks(guest, topo, which):
    bdf = _uplinks(topo)[which]
    ctrl = guest.acs_ctrl(bdf)
    assert ctrl is not None, "setpci finds no ACS capability on %s" % bdf
    assert ctrl == 0, "ACS Control on %s is %#06x, expected 0" % (bdf, ctrl)


def test_switch_ports_have_no_acs(guest, topo):
    """The x3130 ports carry no ACS capability: nothing to clear there, and nothing was faked."""
    for sw in topo["switches"]:
        for bdf in [sw["upstream"]] + sw["downstream"]:
            assert guest.acs_ctrl(bdf) is None, "%s unexpectedly has an ACS capability" % bdf

