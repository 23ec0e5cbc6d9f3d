# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``gds_gdsio_jobfile``: a gdsio configuration file (``[global]`` and ``[jobN]`` sections with
``numa_node``, ``gpu_dev_id``, ``num_threads``, ``directory``) that runs jobs of one template at
once, in the guide's format (every GPU at once: measure/plan.py)."""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import IO_TYPES, key_range, size_bytes, xfer_type_error


class PlanError(Exception):
    """A value the plan or its job file cannot use; the message names it."""


def _size_word(value):
    return str(value)


def _fail(field, value, why):
    raise PlanError("gds_gdsio_jobfile: %s %r: %s" % (field, value, why))


def _text(field, value, limit, refused=""):
    """A value written after ``key=``: one line of text, no control character, no white space at
    its ends (readers trim it), at most ``limit`` bytes, none of ``refused``."""
    if not isinstance(value, str) or not value:
        _fail(field, value, "expected a non-empty string")
    for char in value:
        if ord(char) < 0x20 or 0x7f <= ord(char) <= 0x9f or char in "\u2028\u2029":
            _fail(field, value, "a control character or line break (U+%04X) cannot be written in a job file"
                  % ord(char))
        if char in refused:
            _fail(field, value, "%r is not allowed here" % char)
    if value != value.strip():
        _fail(field, value, "leading or trailing white space would be trimmed by the reader")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        _fail(field, value, "not valid UTF-8 text")
    if size > limit:
        _fail(field, value, "longer than %d bytes" % limit)
    return value


def _whole(field, value, key):
    low, high = key_range(key)  # gdsbench's bounds of that job-file key
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        _fail(field, value, "expected a whole number of %d..%d" % (low, high))
    return value


def _size(field, value, ranges=False):
    """gdsbench's sizes (measure/vocab.py: its units, 1..its largest); or MIN:MAX:STEP where ranges."""
    word = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    parts = word.split(":") if isinstance(word, str) else [""]
    good = (len(parts) == 1 or (ranges and len(parts) == 3)) and all(size_bytes(part) for part in parts)
    if not good:
        _fail(field, value, "expected a size such as 4K, 1M or 1G" + (", or MIN:MAX:STEP" if ranges else ""))
    return _size_word(word)


def _seconds(field, value):
    plain = value.replace(".", "", 1) if isinstance(value, str) else ""
    if plain.isascii() and plain.isdigit():
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1e7:
        _fail(field, value, "expected seconds, 0..10000000")
    # whole seconds, as gdsio reads them; a fraction rounds up (truncated, 0.5 s would be 0:
    # one pass instead of a timed run)
    return "%d" % -(-value // 1)


def _shared(jobs):
    """What the jobs of one file must share: its [global] section's values."""
    shared = {}
    for key in ("xfer_type", "io_type", "io_size", "size", "duration"):
        values = {str(j.get(key)) for j in jobs}
        if len(values) > 1:
            raise PlanError("gds_gdsio_jobfile: the jobs differ in %s (%s); one file runs one kind of job"
                            % (key, ", ".join(sorted(values))))
        shared[key] = jobs[0].get(key)
    if not isinstance(shared["io_type"], str) or shared["io_type"] not in IO_TYPES:
        raise PlanError("gds_gdsio_jobfile: io_type %r is not one of %s" % (shared["io_type"], ", ".join(IO_TYPES)))
    return shared


def gds_gdsio_jobfile(jobs, name="gds_bench"):
    """A gdsio configuration file for ``jobs`` run at once: the parameters they share go to
    ``[global]`` (they must share them), each job's GPU, NUMA node, threads and directory to its
    ``[jobN]``. Skipped jobs are left out.

    Every value is one line after ``key=``, and the format has no escapes, so data that would
    change the file's structure is refused (PlanError naming the field), never written: numbers
    and sizes are checked and written by this function; a value never holds a line break or
    another control character (C0, DEL, C1, U+2028/U+2029), nor leading or trailing white space
    (readers trim it); ``directory`` is an absolute path without `` #``/`` ;`` (an inline
    comment to INI readers such as inih); ``name`` is a label, also without ``[ ] = # ;``."""
    jobs = [j for j in jobs or [] if not j.get("skip")]
    if not jobs:
        raise PlanError("gds_gdsio_jobfile: no job to write")
    shared = _shared(jobs)
    xfer = _whole("xfer_type", shared["xfer_type"], "xfer_type")
    if xfer_type_error(xfer):
        _fail("xfer_type", xfer, xfer_type_error(xfer))
    lines = ["[global]", "name=%s" % _text("name", name, 63, refused="[]=#;"), "xfer_type=%d" % xfer,
             "rw=%s" % shared["io_type"], "bs=%s" % _size("io_size", shared["io_size"], ranges=True),
             "size=%s" % _size("size", shared["size"]), "runtime=%s" % _seconds("duration", shared["duration"]),
             "do_verify=0"]
    for number, job in enumerate(jobs, 1):
        lines += ["", "[job%d]" % number]
        if job.get("numa") is not None:
            lines.append("numa_node=%d" % _whole("numa", job["numa"], "numa_node"))
        if job.get("gpu") is not None:
            lines.append("gpu_dev_id=%d" % _whole("gpu", job["gpu"], "gpu_dev_id"))
        target = _text("target", job.get("target"), 4095)
        if not target.startswith("/"):
            _fail("target", target, "expected an absolute path")
        if " #" in target or " ;" in target:
            _fail("target", target, "' #' and ' ;' start an inline comment to INI readers such as inih")
        lines += ["num_threads=%d" % _whole("threads", job.get("threads"), "num_threads"), "directory=%s" % target]
    return "\n".join(lines) + "\n"
