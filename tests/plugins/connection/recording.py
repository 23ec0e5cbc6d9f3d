# -*- coding: utf-8 -*-
"""Connection ``recording``: the local connection, with every command it is asked to run written to
$GDS_TEST_CONNECTION_LOG, and the host unreachable for anything that would reboot or halt it.

Tests use it for a node whose reboot must never be attempted: a reboot (or the boot id the reboot
action reads first) shows in the log and fails the host as unreachable, so nothing is rebooted
even when the guard under test fails."""
from __future__ import annotations

DOCUMENTATION = r"""
name: recording
short_description: local connection that logs commands and refuses reboots (tests only)
description:
  - Runs commands like ansible.builtin.local and appends each to the file named by GDS_TEST_CONNECTION_LOG.
  - A command that reboots, halts or reads the boot id raises an unreachable error instead.
author: gds-commission contributors (!UNKNOWN)
"""

import os
import re

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.connection.local import Connection as LocalConnection

# what ansible.builtin.reboot runs through the connection: the boot id first, then shutdown
REBOOTING = re.compile(r"\b(shutdown|reboot|halt|poweroff|kexec|boot_id|init\s+[06])\b")


class Connection(LocalConnection):
    transport = "recording"

    def exec_command(self, cmd, in_data=None, sudoable=True):
        log = os.environ.get("GDS_TEST_CONNECTION_LOG")
        if log:
            with open(log, "a") as handle:
                handle.write(cmd.replace("\n", " ") + "\n")
        if REBOOTING.search(cmd):
            raise AnsibleConnectionFailure("recording connection: host unreachable for %r" % cmd)
        return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
