# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the benchmark plan of a node.

``gds_bench_plan``: every GPU is measured, and a node is signed off for every GPU or not at all.
For every array (a mount and the GPUs local to it): the profile's job templates with each of its
GPUs, in template order (the write that creates the files first); the first read template into
host memory (transfer type 1, the drives' measured ceiling, ``ceiling`` of each GPU's read); the
first read template again from a GPU of another group (non-affine), and a ``compare`` on the
first GPU's read: optimal/non-affine throughput, the guide's 40 % penalty made a check. A GPU
whose group has no array runs the templates on its nearest array (``nonaffine``, judged by the
non-affine thresholds). Then every GPU at once (``jobs``: one gdsbench process running a gdsio
job file): each on its own array, and all on one array. A CPU transfer type touches no GPU: it
runs once per array, and the plan says so in its skip entries.

A target with ``far_mount`` (a network mount, from ``gds_netfs_bench_targets``) measures the
penalty the other way round, as the guide's NFS chapter does: the same GPU against a mount
through a NIC far from it (a write there first, so that the read has files).

``gds_netfs_bench_targets``: those targets from the gds_netfs mounts and the topology: each GPU
against the mount of its own NIC, plus the mount through its farthest NIC.

``gds_bench_progress_steps``: the waits that follow a background run job by job (each job's
start and end with the console's words and a bound, then the run's end; measure/progress.py).

``gds_gdsio_jobfile``: a gdsio configuration file (``[global]`` and ``[jobN]`` sections with
``numa_node``, ``gpu_dev_id``, ``num_threads``, ``directory``) that runs jobs of one template at
once, in the guide's format.
"""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.hw.pci import LINK_CLASSES, class_rank
from ansible_collections.gds.commission.plugins.module_utils.measure.progress import progress_steps
from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import drive_spec_error
from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import (
    GPU_XFER_TYPES, IO_TYPES, io_is_read, io_is_write, key_range, size_bytes, xfer_type_error, xfer_types,
)


class PlanError(Exception):
    """A value the plan cannot use; the message names it."""


def _first_read(templates):
    return next((t for t in templates if t.get("io_type", "read") == "read"), None)


def _drive_spec(given):
    """The profile's gds_bench_drive_spec, every entry checked: PlanError names the first bad one."""
    given = given or {}
    if not isinstance(given, dict):
        raise PlanError("gds_bench_drive_spec must be a dict of job template name: [metric, value], got %r"
                        % (given,))
    for name, spec in given.items():
        why = drive_spec_error(spec)
        if why:
            raise PlanError("gds_bench_drive_spec.%s: %s; got %r" % (name, why, spec))
    return given


CPU_REASON = "the CPU transfer type does not touch a GPU"
# O_DIRECT into host memory (CPUONLY): what the drives give without a GPU
HOST_XFER = xfer_types("odirect", without="gpu")[0]


def _template_thresholds(given, key):
    """A per-template thresholds dict of the profile ({} when unset); PlanError names the key."""
    given = given or {}
    if not isinstance(given, dict) or not all(isinstance(v, dict) for v in given.values()):
        raise PlanError("%s must be a dict of job template name: {metric: [reference, lower, upper, unit]}, got %r"
                        % (key, given))
    return given


def _concurrency(given):
    """The profile's gds_bench_concurrency: {own_array, one_array} -> [reference, lower, upper,
    unit] or None (recorded, not judged); PlanError names a bad key or value."""
    given = given or {}
    if not isinstance(given, dict) or set(given) - set(SCENARIOS):
        raise PlanError("gds_bench_concurrency must be a dict with the keys %s, got %r" % (", ".join(SCENARIOS), given))
    out = {}
    for key in SCENARIOS:
        value = given.get(key)
        if value in (None, [], {}):
            out[key] = None
        elif isinstance(value, (list, tuple)) and len(value) in (3, 4):
            out[key] = list(value)
        else:
            raise PlanError("gds_bench_concurrency.%s: expected [reference, lower, upper, unit] or [], got %r"
                            % (key, value))
    return out


# the two runs of every GPU at once: each GPU on its own array, and all of them on one array
SCENARIOS = ("own_array", "one_array")


def _nearest(gpu, arrays, matrix, numa_of_gpu):
    """The array nearest a GPU that has none of its own: the best link class from the GPU to the
    array's drives (the topology's matrix), then an array of the GPU's NUMA node, then the first."""
    row = (matrix or {}).get("GPU%d" % gpu) or {}

    def key(item):
        index, array = item
        classes = [row.get(m) for m in array.get("members") or [] if row.get(m)]
        rank = min(class_rank(c) for c in classes) if classes else len(LINK_CLASSES)
        numas = {numa_of_gpu.get(g) for g in array.get("gpus") or []}
        return rank, numa_of_gpu.get(gpu) not in numas, index
    return min(enumerate(arrays), key=key)[1]


def gds_bench_plan(arrays, profile):
    """The gdsbench jobs of a node (docs/benchmark.md, How the role plans jobs)."""
    templates = list(profile.get("templates") or [])
    templates.sort(key=lambda t: 0 if io_is_write(t.get("io_type")) else 1)
    thresholds = profile.get("thresholds") or {}
    nonaffine = _template_thresholds(profile.get("nonaffine_thresholds"), "gds_bench_nonaffine_thresholds")
    drive_spec = _drive_spec(profile.get("drive_spec"))
    concurrency = _concurrency(profile.get("concurrency"))
    xfer = int(profile.get("xfer_type", 0))
    gpu_xfer = xfer in GPU_XFER_TYPES
    all_gpus = list(profile.get("gpu_indices") or [])
    numa_of_gpu = {int(k): v for k, v in (profile.get("numa_of_gpu") or {}).items()}
    skip_gpu = None if profile.get("run_gpu", True) else (profile.get("skip_reason") or "no usable GPU")
    # -D reads use the per-thread files of the write job (gdsbench.<thread>, as gdsio does): a
    # read with more threads than the write made shares one file instead (-f).
    writers = [int(t.get("threads", 8)) for t in templates if io_is_write(t.get("io_type"))]
    files = max(writers) if writers else 0
    read = _first_read(templates)
    local = [a for a in arrays if "far_mount" not in a]  # network targets choose their GPUs themselves
    placed = {g for a in local for g in a.get("gpus") or []}
    # every GPU: those of an array on it, the others (no drive in their group) on the nearest one
    homeless = [g for g in all_gpus if g not in placed] if gpu_xfer and local else []

    def single(array, gpu, template, name, own=True):
        label = array.get("label") or array["mount"].rstrip("/").split("/")[-1] or "array"
        target = array.get("target") or array["mount"].rstrip("/") + "/gds-bench"
        members = len(array.get("members") or []) or 1
        job = {
            "name": name, "template": template["name"], "target": target, "gpu": gpu if gpu_xfer else None,
            "numa": numa_of_gpu.get(gpu) if gpu is not None else None,
            "xfer_type": xfer, "io_type": template.get("io_type", "read"),
            "io_size": template.get("io_size", "1M"), "threads": int(template.get("threads", 8)),
            "size": template.get("size", profile.get("size", "1G")),
            # the sequential write lays out the files every read of the pair then needs whole: one
            # full pass, as the all-at-once job's write (a 5 s write left GPU 0's 8 x 1 GiB files
            # short on four H200s, and both its reads broke)
            "duration": 0 if template.get("io_type", "read") == "write"
            else int(template.get("duration", profile.get("duration", 30))),
            # a GPU without a drive of its own is judged by the non-affine thresholds, never the affine ones
            "thresholds": (thresholds if own else nonaffine).get(template["name"], {}),
            "expect_path": profile.get("expect_path") if gpu_xfer else None,
            # worker processes: a template's own value, else gdsbench's default (processes for
            # large sequential cuFile I/O, threads for small or random I/O: bench/RESULTS.md)
            "procs": (None if template.get("procs") is None else int(template["procs"])) if gpu_xfer else 1,
        }
        if not own:
            # far from the drives: cuFile may stage the data in a GPU near them, as it does for
            # the non-affine pair (the watch's bounce check PASSes naming that GPU)
            job.update(nonaffine=True, expect_bounce=bool(gpu_xfer))
        # the drives the job's watch reads: the array's, else the disk under the target directory.
        # A simulated node's jobs run on the controller, in a directory of its tree: its array's
        # members are the fixture's, the disk that carries the I/O is the controller's
        if not profile.get("live", True):
            if "far_mount" not in array:
                job["drives_from_target"] = True
        elif array.get("md") or array.get("members"):
            if array.get("md"):
                job["md"] = array["md"]
            if array.get("members"):
                job["members"] = list(array["members"])
        elif "far_mount" not in array:
            job["drives_from_target"] = True
        if io_is_read(job["io_type"]) and job["threads"] > files:
            job["file"] = target + "/gdsbench.0"
        spec = drive_spec.get(template["name"])
        if spec:
            job["spec"] = {"metric": spec[0], "value": float(spec[1]) * members}
        if gpu_xfer and skip_gpu:
            job["skip"] = skip_gpu
        if array.get("skip"):
            job["skip"] = array["skip"]
        return job

    # singles: (gpu, array id, template) -> job name; home: (gpu, template) -> the GPU's own single
    jobs, singles, home, labels, hosts = [], {}, {}, {}, {}
    for array in arrays:
        label = array.get("label") or array["mount"].rstrip("/").split("/")[-1] or "array"
        labels[id(array)] = label
        gpus = list(array.get("gpus") or [])
        per_gpu = gpu_xfer and "far_mount" not in array and bool(gpus)
        # a CPU transfer type runs once per array: its data never reaches a GPU
        run = gpus if per_gpu else [gpus[0] if gpus else (all_gpus[0] if all_gpus else None)]
        for gpu in run:
            for template in templates:
                name = "%s gpu%s %s" % (label, gpu, template["name"]) if per_gpu else "%s %s" % (label, template["name"])
                jobs.append(single(array, gpu, template, name))
                singles[(gpu, id(array), template["name"])] = name
                if per_gpu:
                    home.setdefault((gpu, template["name"]), name)
        others = [g for g in all_gpus if g not in gpus]
        gain = profile.get("affinity_gain")
        if read and gain and gpus and "far_mount" in array:
            jobs += _far_nic_jobs(jobs, array, label, read, templates, gain,
                                  None if gpu_xfer else CPU_REASON, skip_gpu or array.get("skip"))
            continue
        if read and per_gpu and not skip_gpu and not array.get("skip"):
            # the measured ceiling: the same drives read into host memory, in the same run
            host = single(array, gpus[0], read, "%s %s host" % (label, read["name"]))
            host.update(xfer_type=HOST_XFER, gpu=None, expect_path=None, procs=1, thresholds={}, spec=None)
            jobs.append(host)
            hosts[id(array)] = host["name"]
            for gpu in gpus:
                _job(jobs, singles[(gpu, id(array), read["name"])])["ceiling"] = host["name"]
        if read and gain and gpus:
            optimal = singles[(run[0], id(array), read["name"])]
            if not gpu_xfer or skip_gpu or not others:
                reason = (CPU_REASON if not gpu_xfer else skip_gpu or "every GPU is local to this array")
                jobs.append({"name": "%s %s non-affine" % (label, read["name"]), "skip": reason,
                             "thresholds": {"affinity_gain": gain}})
                continue
            # Prefer the farthest GPU: another NUMA node shows the guide's penalty most clearly.
            others.sort(key=lambda g: (numa_of_gpu.get(g) == numa_of_gpu.get(run[0]), g))
            far = others[0]
            nonaffine_name = "%s %s non-affine gpu%d" % (label, read["name"], far)
            # the far GPU's data may land on a GPU near the drives first: what this job measures
            jobs.append(dict(_job(jobs, optimal), name=nonaffine_name, gpu=far, numa=numa_of_gpu.get(far),
                             thresholds={}, spec=None, expect_bounce=True, ceiling=None))
            _job(jobs, optimal)["compare"] = {"job": nonaffine_name, "metric": "throughput_gib_s",
                                              "as": "affinity_gain", "threshold": gain}
    homes = {}
    for gpu in homeless:
        array = homes[gpu] = _nearest(gpu, local, profile.get("matrix"), numa_of_gpu)
        for template in templates:
            name = "%s gpu%d non-affine %s" % (labels[id(array)], gpu, template["name"])
            jobs.append(dict(single(array, gpu, template, name, own=False),
                             **({"ceiling": hosts[id(array)]} if template is read and id(array) in hosts else {})))
            singles[(gpu, id(array), template["name"])] = name
            home[(gpu, template["name"])] = name
    if all_gpus and local and not gpu_xfer:
        reason = "%s: one job per array, not one per GPU" % CPU_REASON
        jobs += [{"name": "every GPU", "skip": reason}, {"name": "all GPUs at once", "skip": reason},
                 {"name": "host ceiling", "skip": "the CPU transfer type reads into host memory already: "
                                                  "its own jobs are what the drives give"}]
    elif gpu_xfer and local:
        jobs += _concurrent_jobs(local, homes, templates, read, home, hosts, labels, single, profile, concurrency, skip_gpu)
    return jobs


def _job(jobs, name):
    return next(j for j in jobs if j["name"] == name)


def _concurrent_jobs(local, homes, templates, read, home, hosts, labels, single, profile, concurrency, skip_gpu):
    """Every GPU at once, in one gdsbench process running a gdsio job file (one [jobN] per GPU):
    each GPU on its own array (a GPU without one on its nearest), then all of them on the first
    array. Each run is a write that makes the files (its sub-jobs share a directory: gdsbench
    numbers each one's files on), the first read template, and the same read into host memory
    (its measured ceiling)."""
    own = [(g, a) for a in local for g in a.get("gpus") or []] + sorted(homes.items())
    gpus = sorted({g for g, dummy in own})
    writer = next((t for t in templates if io_is_write(t.get("io_type"))), None)
    why = None
    if profile.get("concurrent") is False:
        why = "gds_bench_concurrent is false"
    elif skip_gpu:
        why = skip_gpu
    elif len(gpus) < 2:
        why = "one GPU: nothing runs at the same time"
    elif read is None or writer is None:
        why = "no read template, or no write template to make the read's files"
    if why:
        return [{"name": "all GPUs at once", "skip": why}]
    runs = [("own_array", "all GPUs on own arrays", own)]
    first = local[0]
    one = [(g, first) for g in gpus]
    if all(a is first for dummy, a in own):
        runs.append(("one_array", None, "every GPU's own storage is %s: the run on their own arrays is "
                     "the run on one array" % labels[id(first)]))
    else:
        runs.append(("one_array", "all GPUs on %s" % labels[id(first)], one))
    out = []
    for scenario, title, pairs in runs:
        if title is None:
            out.append({"name": "all GPUs on one array", "skip": pairs})
            continue
        out += _concurrent_run(scenario, title, pairs, writer, read, home, hosts, labels, single, profile,
                               concurrency[scenario])
    return out


def _concurrent_run(scenario, title, pairs, writer, read, home, hosts, labels, single, profile, threshold):
    """The write, read and host-memory read of one concurrent run over ``pairs`` [(gpu, array)].
    Each sub-job names the single job it is compared with (``single``): the GPU's own, on its
    own array (or its nearest), alone; the host read of the array it reads here."""
    subs = []
    for gpu, array in pairs:
        base = single(array, gpu, read, "gpu%d %s" % (gpu, labels[id(array)]))
        # a job file's NUMA node is a node's number: a GPU without one (-1) is not pinned
        numa = base.get("numa") if isinstance(base.get("numa"), int) and base["numa"] >= 0 else None
        sub = {key: base[key] for key in ("name", "gpu", "target", "threads") if key in base}
        sub.update(numa=numa, array=labels[id(array)], single=home.get((gpu, read["name"])),
                   host=hosts.get(id(array)))
        for key in ("md", "members", "drives_from_target"):
            if key in base:
                sub[key] = base[key]
        subs.append(sub)
    shared = single(pairs[0][1], pairs[0][0], read, "")
    members = sorted({m for s in subs for m in s.get("members") or []})
    arrays = sorted({s["array"] for s in subs})
    out = []
    steps = (("write", writer, profile.get("xfer_type", 0)), ("read", read, profile.get("xfer_type", 0)),
             ("host", read, HOST_XFER))
    for step, template, xfer in steps:
        name = "%s %s%s" % (title, template["name"], " host" if step == "host" else "")
        # the write makes files the read then needs whole (sub-jobs that share a directory get new
        # numbers, files nothing wrote before): one full pass, never cut short by the runtime (a
        # 5 s write left 0.55 of 1 GiB each on the H100 machine, and the read refused the files)
        io = {"xfer_type": int(xfer), "io_type": template.get("io_type", "read"),
              "io_size": template.get("io_size", "1M"), "size": shared["size"],
              "duration": 0 if step == "write" else shared["duration"]}
        step_subs = []
        for sub in subs:
            entry = dict(sub, **io)
            host = entry.pop("host")
            if step == "host":
                entry.update(gpu=None, single=host)
            if step == "write":
                # the write runs the read's threads (the read needs those files): comparable to the
                # single writes only when they ran as many
                same = int(template.get("threads", 8)) == sub["threads"] and template.get("size") == read.get("size")
                entry["single"] = home.get((sub["gpu"], template["name"])) if same else None
            step_subs.append(entry)
        procs = shared.get("procs")
        job = dict(io, name=name, scenario=scenario, step=step, template=template["name"],
                   threads=sum(s["threads"] for s in subs), thresholds={},
                   expect_path=profile.get("expect_path") if step != "host" else None,
                   procs=procs * len(subs) if procs and step != "host" else (1 if step == "host" else None),
                   jobs=step_subs, jobfile=gds_gdsio_jobfile(step_subs, name="gds_bench_%s_%s" % (scenario, step)))
        if members:
            job["members"] = members
            if len(arrays) > 1:
                job["drive_groups"] = {a: sorted({m for s in subs if s["array"] == a for m in s.get("members") or []})
                                       for a in arrays}
        elif any(s.get("drives_from_target") for s in subs):
            job["drives_from_target"] = True
            job["target"] = subs[0]["target"]
        if step == "read":
            job["ceiling"] = "%s %s host" % (title, read["name"])
            if threshold:
                job["scaling"] = threshold
        out.append(job)
    return out


def _far_nic_jobs(jobs, array, label, read, templates, gain, cpu_reason, skip):
    """The penalty of a network mount pair: the same GPU against the far NIC's mount."""
    optimal = "%s %s" % (label, read["name"])
    name = "%s far NIC" % optimal
    reason = cpu_reason or skip or (None if array.get("far_mount") else
                                    "no network mount leaves through a NIC far from this GPU")
    if reason:
        return [{"name": name, "skip": reason, "thresholds": {"affinity_gain": gain}}]
    far_target = array["far_mount"].rstrip("/")
    if not array.get("target"):
        far_target += "/gds-bench"
    suffix = " (%s)" % array["far_nic"] if array.get("far_nic") else ""
    name += suffix
    out = []
    base = next(j for j in jobs if j["name"] == optimal)
    writer = next((t for t in templates if io_is_write(t.get("io_type"))), None)
    if writer:
        first = next(j for j in jobs if j["name"] == "%s %s" % (label, writer["name"]))
        out.append(dict(first, name="%s far NIC write%s" % (label, suffix), target=far_target,
                        thresholds={}, spec=None, compare=None))
    far = dict(base, name=name, target=far_target, thresholds={}, spec=None)
    if "file" in base:
        far["file"] = far_target + "/gdsbench.0"
    out.append(far)
    base["compare"] = {"job": name, "metric": "throughput_gib_s", "as": "affinity_gain",
                       "threshold": gain}
    return out


def _class(topology, gpu, nics):
    row = (topology.get("matrix") or {}).get("GPU%d" % gpu) or {}
    classes = [row[n] for n in nics or () if row.get(n)]
    return min(classes, key=class_rank) if classes else None


def gds_netfs_bench_targets(mounts, topology, gpus=None, subdir="", root=""):
    """Bench targets ``{mount, label, gpus: [g], members: [], nic, far_mount, far_nic}``.

    ``gpus`` empty: the first GPU paired with each NIC that carries a mount. A GPU's own mount
    is one through its NIC (several mounts through one NIC are shared out in turn, as the guide
    spreads its jobs over ``data/0`` and ``data/1``); its far mount goes through the NIC of the
    worst class to it, a NUMA node away where there is one. A GPU without a mount of its own gets
    a target that says so (``skip``). ``root`` prefixes the paths (a simulated node's gds_root)."""
    mounts = [m for m in mounts or [] if m.get("nics")]
    subdir = (subdir or "").strip("/")
    root = (root or "").rstrip("/")
    if gpus:
        chosen = list(gpus)
    else:
        chosen = []
        for mount in mounts:
            paired = [g for g in mount.get("gpus") or [] if g not in chosen]
            if paired and not any(g in chosen for g in mount.get("gpus") or []):
                chosen.append(paired[0])
    known = {g["index"] for g in topology.get("gpus") or []}
    turn = {}
    targets = []
    for gpu in chosen:
        if isinstance(gpu, bool) or not isinstance(gpu, int) or (known and gpu not in known):
            raise PlanError("gds_bench_netfs_gpus: %r is not a GPU index of this node" % (gpu,))
        own = [m for m in mounts if gpu in (m.get("gpus") or [])]
        if not own:
            targets.append({"mount": "", "label": "GPU%d" % gpu, "gpus": [gpu], "members": [],
                            "skip": "no network mount leaves through a NIC of GPU%d" % gpu,
                            "far_mount": None})
            continue
        nic = own[0]["nic"]
        mount = own[turn.get(nic, 0) % len(own)]
        turn[nic] = turn.get(nic, 0) + 1
        own_rank = class_rank(_class(topology, gpu, mount["nics"]))
        far = [m for m in mounts if class_rank(_class(topology, gpu, m["nics"])) > own_rank]
        far.sort(key=lambda m: -class_rank(_class(topology, gpu, m["nics"])))
        path = root + mount["mountpoint"].rstrip("/") + ("/" + subdir if subdir else "")
        target = {"mount": path, "target": path, "label": "GPU%d %s" % (gpu, mount["mountpoint"]), "gpus": [gpu],
                  "members": [], "nic": mount["nic"], "far_mount": None, "far_nic": None}
        if far:
            target["far_mount"] = root + far[0]["mountpoint"].rstrip("/") + ("/" + subdir if subdir else "")
            target["far_nic"] = far[0]["nic"]
        targets.append(target)
    return targets


def _size_word(value):
    return str(value)


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
    def fail(field, value, why):
        raise PlanError("gds_gdsio_jobfile: %s %r: %s" % (field, value, why))

    def text(field, value, limit, refused=""):
        if not isinstance(value, str) or not value:
            fail(field, value, "expected a non-empty string")
        for char in value:
            if ord(char) < 0x20 or 0x7f <= ord(char) <= 0x9f or char in "\u2028\u2029":
                fail(field, value, "a control character or line break (U+%04X) cannot be written in a job file"
                     % ord(char))
            if char in refused:
                fail(field, value, "%r is not allowed here" % char)
        if value != value.strip():
            fail(field, value, "leading or trailing white space would be trimmed by the reader")
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            fail(field, value, "not valid UTF-8 text")
        if size > limit:
            fail(field, value, "longer than %d bytes" % limit)
        return value

    def whole(field, value, key):
        low, high = key_range(key)  # gdsbench's bounds of that job-file key
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            fail(field, value, "expected a whole number of %d..%d" % (low, high))
        return value

    def size(field, value, ranges=False):
        """gdsbench's sizes (measure/vocab.py: its units, 1..its largest); or MIN:MAX:STEP where ranges."""
        word = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
        parts = word.split(":") if isinstance(word, str) else [""]
        good = (len(parts) == 1 or (ranges and len(parts) == 3)) and all(size_bytes(part) for part in parts)
        if not good:
            fail(field, value, "expected a size such as 4K, 1M or 1G" + (", or MIN:MAX:STEP" if ranges else ""))
        return _size_word(word)

    def seconds(field, value):
        plain = value.replace(".", "", 1) if isinstance(value, str) else ""
        if plain.isascii() and plain.isdigit():
            value = float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1e7:
            fail(field, value, "expected seconds, 0..10000000")
        # whole seconds, as gdsio reads them; a fraction rounds up (truncated, 0.5 s would be 0:
        # one pass instead of a timed run)
        return "%d" % -(-value // 1)

    jobs = [j for j in jobs or [] if not j.get("skip")]
    if not jobs:
        raise PlanError("gds_gdsio_jobfile: no job to write")
    shared = {}
    for key in ("xfer_type", "io_type", "io_size", "size", "duration"):
        values = {str(j.get(key)) for j in jobs}
        if len(values) > 1:
            raise PlanError("gds_gdsio_jobfile: the jobs differ in %s (%s); one file runs one kind of job"
                            % (key, ", ".join(sorted(values))))
        shared[key] = jobs[0].get(key)
    if not isinstance(shared["io_type"], str) or shared["io_type"] not in IO_TYPES:
        raise PlanError("gds_gdsio_jobfile: io_type %r is not one of %s" % (shared["io_type"], ", ".join(IO_TYPES)))
    xfer = whole("xfer_type", shared["xfer_type"], "xfer_type")
    if xfer_type_error(xfer):
        fail("xfer_type", xfer, xfer_type_error(xfer))
    lines = ["[global]", "name=%s" % text("name", name, 63, refused="[]=#;"), "xfer_type=%d" % xfer,
             "rw=%s" % shared["io_type"], "bs=%s" % size("io_size", shared["io_size"], ranges=True),
             "size=%s" % size("size", shared["size"]), "runtime=%s" % seconds("duration", shared["duration"]),
             "do_verify=0"]
    for number, job in enumerate(jobs, 1):
        lines += ["", "[job%d]" % number]
        if job.get("numa") is not None:
            lines.append("numa_node=%d" % whole("numa", job["numa"], "numa_node"))
        if job.get("gpu") is not None:
            lines.append("gpu_dev_id=%d" % whole("gpu", job["gpu"], "gpu_dev_id"))
        target = text("target", job.get("target"), 4095)
        if not target.startswith("/"):
            fail("target", target, "expected an absolute path")
        if " #" in target or " ;" in target:
            fail("target", target, "' #' and ' ;' start an inline comment to INI readers such as inih")
        lines += ["num_threads=%d" % whole("threads", job.get("threads"), "num_threads"), "directory=%s" % target]
    return "\n".join(lines) + "\n"


def _filter_errors(function):
    def wrapper(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except PlanError as exc:
            from ansible.errors import AnsibleFilterError
            raise AnsibleFilterError(str(exc))
    return wrapper


class FilterModule(object):
    def filters(self):
        return {"gds_bench_plan": _filter_errors(gds_bench_plan),
                "gds_netfs_bench_targets": _filter_errors(gds_netfs_bench_targets),
                "gds_gdsio_jobfile": _filter_errors(gds_gdsio_jobfile),
                "gds_bench_progress_steps": progress_steps}
