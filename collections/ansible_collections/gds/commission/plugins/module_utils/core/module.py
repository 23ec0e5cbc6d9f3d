# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The boundary of every gds-commission module: what it returns is valid UTF-8.

Node data is bytes (a mount point, a sysfs attribute, a command's output); core/files.py decodes it
with ``surrogateescape`` so nothing raises while it is read. ansible-core, though, refuses a
result holding a lone surrogate ("Refusing to deserialize an invalid UTF8 string value") and
fails the whole task without naming a file. GdsModule, an AnsibleModule, escapes them on the way
out (``\\xNN``, core/files.json_safe), says in a warning which files and fields held them and,
given ``check_area``, adds the WARN check ``<area>: node data is valid UTF-8`` to ``checks``.

A module imports it as ``AnsibleModule`` (``from ...module_utils.core.module import GdsModule as
AnsibleModule``): the one line that puts it at the module's boundary.

Its ``invocation`` (the arguments Ansible echoes in every result, and so in every registered
variable, callback event and worker-to-controller transfer) leaves out what is large: an argument
longer than ECHO_LIMIT characters as JSON (the topology a role passes, a file's content) is echoed
as a one-line summary of its size, as ``no_log`` arguments are echoed as a placeholder.

Its ``run_command`` is bounded: every tool a module runs (mdadm, modprobe, ip, scontrol ...) goes
through core/proc.py in its own process group and is killed after ``timeout`` seconds
(COMMAND_TIMEOUT unless the caller gives one), so a stuck device or daemon never stalls a node's
run; a command that ran out returns rc TIMED_OUT_RC with the reason in stderr.
"""
from __future__ import annotations

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gds.commission.plugins.module_utils.core import proc
from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import escape_surrogates, json_safe, undecodable_files


COMMAND_TIMEOUT = 300  # seconds; a tool that can take longer (mkfs of a large array) says so
TIMED_OUT_RC = 124     # what timeout(1) returns
ECHO_LIMIT = 1024      # characters of JSON an argument may have to be echoed as it is
# the argument specs of the node's kernel roots (doc fragments gds.sysfs and gds.procfs)
SYSFS_ROOT = dict(type="path", default="/sys")
PROCFS_ROOT = dict(type="path", default="/proc")


def echoed(params):
    """The arguments as ``invocation`` echoes them: each one longer than ECHO_LIMIT characters as
    JSON replaced by what it was (``dict of 7 keys, 57134 characters as JSON: not echoed``)."""
    out = {}
    for name, value in params.items():
        if isinstance(value, (dict, list, str)):
            size = len(value) if isinstance(value, str) else len(json.dumps(value, default=str))
            if size > ECHO_LIMIT:
                what = "str" if isinstance(value, str) else "%s of %d %s" % (
                    type(value).__name__, len(value), "keys" if isinstance(value, dict) else "items")
                value = "%s, %d characters%s: not echoed" % (what, size, "" if isinstance(value, str) else " as JSON")
        out[name] = value
    return out


def utf8_result(result, check_area=None):
    """(``result`` made valid UTF-8, the warning that says what was escaped or None)."""
    result, fields = json_safe(result)
    files = [escape_surrogates(f) for f in undecodable_files()]
    if not fields:
        return result, None
    where = "; ".join(fields[:20]) + (" and %d more" % (len(fields) - 20) if len(fields) > 20 else "")
    message = "bytes that are not UTF-8 %sescaped as \\xNN in %s" % (
        "(read from %s) " % ", ".join(files) if files else "", where)
    if check_area and isinstance(result.get("checks"), list):
        result["checks"] = result["checks"] + [check(
            "%s: node data is valid UTF-8" % check_area, "WARN", "UTF-8",
            ", ".join(files) or "%d field(s)" % len(fields), message)]
    return result, message


class GdsModule(AnsibleModule):
    """AnsibleModule whose results, failures and warnings are always valid UTF-8."""

    def __init__(self, *args, **kwargs):
        self.gds_check_area = kwargs.pop("check_area", None)
        AnsibleModule.__init__(self, *args, **kwargs)

    def warn(self, warning, *args, **kwargs):
        AnsibleModule.warn(self, escape_surrogates(str(warning)), *args, **kwargs)

    def _utf8(self, result):
        # the echo of the arguments too: a host name or path given to the module may hold them
        result.setdefault("invocation", {"module_args": echoed(self.params)})
        result, message = utf8_result(result, getattr(self, "gds_check_area", None))
        if message:
            AnsibleModule.warn(self, message)
        return result

    def exit_json(self, **kwargs):
        AnsibleModule.exit_json(self, **self._utf8(kwargs))

    def fail_json(self, msg, **kwargs):
        kwargs = self._utf8(dict(kwargs, msg=str(msg)))
        AnsibleModule.fail_json(self, **kwargs)

    def run_command(self, args, check_rc=False, timeout=None, environ_update=None, handle_exceptions=True, **options):
        """(rc, stdout, stderr) of ``args`` (an argument list, never a shell), at most ``timeout``
        seconds (COMMAND_TIMEOUT), in the C locale as AnsibleModule runs it. A command that cannot
        start: rc 127 (raised as OSError with handle_exceptions=False); one that ran out:
        rc TIMED_OUT_RC, its process group killed.

        AnsibleModule's own code calls it too (lsattr and chattr when it copies a file's
        attributes, with the path as bytes): a bytes argument is a file name. An option of
        Ansible's own runner that this one does not implement (cwd, data, a shell) fails,
        naming it, rather than running unbounded."""
        if isinstance(args, (str, bytes)) or not args:
            self.fail_json(msg="run_command: an argument list is needed, got %r" % (args,))
        argv = [os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args]
        if options:
            self.fail_json(msg="run_command: %s not supported by the bounded runner (core/module.py)"
                           % ", ".join(sorted(options)), cmd=argv)
        env = dict(os.environ, LANG="C", LC_ALL="C", LC_MESSAGES="C")
        env.update(environ_update or {})
        limit = COMMAND_TIMEOUT if timeout is None else timeout
        result = proc.run(argv, limit, env=env)
        if result.error:
            if not handle_exceptions:
                raise OSError(result.error)
            rc, out, err = 127, "", result.error
        elif result.timed_out:
            rc, out, err = TIMED_OUT_RC, result.stdout, (result.stderr + "\n" if result.stderr else "") + \
                "%s did not finish within %g s: killed" % (argv[0], limit)
        else:
            rc, out, err = result.rc, result.stdout, result.stderr
        if check_rc and rc != 0:
            self.fail_json(msg=(err or out).strip() or "%s exited %s" % (argv[0], rc), cmd=argv, rc=rc,
                           stdout=out, stderr=err)
        return rc, out, err
