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
"""
from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.files import escape_surrogates, json_safe, undecodable_files


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
        result.setdefault("invocation", {"module_args": self.params})
        result, message = utf8_result(result, getattr(self, "gds_check_area", None))
        if message:
            AnsibleModule.warn(self, message)
        return result

    def exit_json(self, **kwargs):
        AnsibleModule.exit_json(self, **self._utf8(kwargs))

    def fail_json(self, msg, **kwargs):
        kwargs = self._utf8(dict(kwargs, msg=str(msg)))
        AnsibleModule.fail_json(self, **kwargs)
