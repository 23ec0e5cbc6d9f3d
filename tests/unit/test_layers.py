"""The unit layer holds: a unit test that starts a playbook or a daemon fails, naming what it started
(tests/conftest.py), so `pytest -m unit` stays the quick loop."""
import subprocess

import pytest
from conftest import INTEGRATION_COMMANDS, IntegrationInUnitTest


@pytest.mark.parametrize("argv", [["ansible-playbook", "--version"], ["/usr/sbin/slurmctld", "-D"], "scontrol show nodes"])
def test_a_unit_test_cannot_start_a_playbook_or_a_daemon(argv):
    with pytest.raises(IntegrationInUnitTest, match="mark it @pytest.mark.integration"):
        subprocess.run(argv, shell=isinstance(argv, str), capture_output=True)


def test_a_unit_test_may_run_a_module_or_a_tool():
    assert subprocess.run(["true"]).returncode == 0
    assert "python3" not in INTEGRATION_COMMANDS


def test_every_test_has_one_layer(request):
    assert request.node.get_closest_marker("unit") and not request.node.get_closest_marker("integration")
