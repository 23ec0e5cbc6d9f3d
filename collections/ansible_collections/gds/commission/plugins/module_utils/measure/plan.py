# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gds_bench role's plan and interface: the gdsbench jobs of a node, and the role's variables.

``gds_bench_plan``: every GPU is measured, and a node is signed off for every GPU or not at all.
For every array (a mount and the GPUs local to it): the profile's job templates with each of its
GPUs, in template order (the write that creates the files first); the first read template into
host memory (transfer type 1, the drives' measured ceiling, ``ceiling`` of each GPU's read); the
first read template again from a GPU of another group (non-affine), and a ``compare`` on the
first GPU's read: optimal/non-affine throughput, the guide's 40 % penalty made a check. A GPU
whose group has no array runs the templates on its nearest array (``nonaffine``, judged by the
non-affine thresholds). Then every GPU at once (``jobs``: one gdsbench process running a gdsio
job file, measure/jobfile.py): each on its own array, and all on one array. A CPU transfer type
touches no GPU: it runs once per array, and the plan says so in its skip entries.

A target with ``far_mount`` (a network mount, from ``gds_netfs_bench_targets``) measures the
penalty the other way round, as the guide's NFS chapter does: the same GPU against a mount
through a NIC far from it (a write there first, so that the read has files).

``gds_netfs_bench_targets``: those targets from the gds_netfs mounts and the topology: each GPU
against the mount of its own NIC, plus the mount through its farthest NIC.
"""
from __future__ import annotations

from ansible_collections.gds.commission.plugins.module_utils.core.spec import RoleSpec, Var, on_node
from ansible_collections.gds.commission.plugins.module_utils.hw.pci import LINK_CLASSES, class_rank
from ansible_collections.gds.commission.plugins.module_utils.measure.jobfile import PlanError, gds_gdsio_jobfile
from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import drive_spec_error
from ansible_collections.gds.commission.plugins.module_utils.measure.vocab import GPU_XFER_TYPES, io_is_read, io_is_write, xfer_name, xfer_types


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


def _label(array):
    return array.get("label") or array["mount"].rstrip("/").split("/")[-1] or "array"


class _Plan(object):
    """One node's plan: the profile read once, then each array's jobs, the GPUs without an array
    of their own, and every GPU at once."""

    def __init__(self, arrays, profile):
        self.arrays, self.profile = arrays, profile
        templates = list(profile.get("templates") or [])
        templates.sort(key=lambda t: 0 if io_is_write(t.get("io_type")) else 1)
        self.templates, self.read = templates, _first_read(templates)
        self.thresholds = profile.get("thresholds") or {}
        self.nonaffine = _template_thresholds(profile.get("nonaffine_thresholds"), "gds_bench_nonaffine_thresholds")
        self.drive_spec = _drive_spec(profile.get("drive_spec"))
        self.concurrency = _concurrency(profile.get("concurrency"))
        self.xfer = int(profile.get("xfer_type", 0))
        self.gpu_xfer = self.xfer in GPU_XFER_TYPES
        self.all_gpus = list(profile.get("gpu_indices") or [])
        self.numa_of_gpu = {int(k): v for k, v in (profile.get("numa_of_gpu") or {}).items()}
        self.skip_gpu = None if profile.get("run_gpu", True) else (profile.get("skip_reason") or "no usable GPU")
        # -D reads use the per-thread files of the write job (gdsbench.<thread>, as gdsio does): a
        # read with more threads than the write made shares one file instead (-f).
        writers = [int(t.get("threads", 8)) for t in templates if io_is_write(t.get("io_type"))]
        self.files = max(writers) if writers else 0
        self.local = [a for a in arrays if "far_mount" not in a]  # network targets choose their GPUs themselves
        placed = {g for a in self.local for g in a.get("gpus") or []}
        # every GPU: those of an array on it, the others (no drive in their group) on the nearest one
        self.homeless = [g for g in self.all_gpus if g not in placed] if self.gpu_xfer and self.local else []
        # singles: (gpu, array id, template) -> job name; home: (gpu, template) -> the GPU's own single
        self.jobs, self.singles, self.home, self.labels, self.hosts = [], {}, {}, {}, {}

    def single(self, array, gpu, template, name, own=True):
        """One gdsbench job: ``template`` with ``gpu`` on ``array``."""
        profile, gpu_xfer = self.profile, self.gpu_xfer
        target = array.get("target") or array["mount"].rstrip("/") + "/gds-bench"
        members = len(array.get("members") or []) or 1
        job = {
            "name": name, "template": template["name"], "target": target, "gpu": gpu if gpu_xfer else None,
            "numa": self.numa_of_gpu.get(gpu) if gpu is not None else None,
            "xfer_type": self.xfer, "io_type": template.get("io_type", "read"),
            "io_size": template.get("io_size", "1M"), "threads": int(template.get("threads", 8)),
            "size": template.get("size", profile.get("size", "1G")),
            # the sequential write lays out the files every read of the pair then needs whole: one
            # full pass, as the all-at-once job's write (a 5 s write left GPU 0's 8 x 1 GiB files
            # short on four H200s, and both its reads broke)
            "duration": 0 if template.get("io_type", "read") == "write"
            else int(template.get("duration", profile.get("duration", 30))),
            # a GPU without a drive of its own is judged by the non-affine thresholds, never the affine ones
            "thresholds": (self.thresholds if own else self.nonaffine).get(template["name"], {}),
            "expect_path": profile.get("expect_path") if gpu_xfer else None,
            # worker processes: a template's own value, else gdsbench's default (processes for
            # large sequential cuFile I/O, threads for small or random I/O: bench/RESULTS.md)
            "procs": (None if template.get("procs") is None else int(template["procs"])) if gpu_xfer else 1,
        }
        if not own:
            # far from the drives: cuFile may stage the data in a GPU near them, as it does for
            # the non-affine pair (the watch's bounce check PASSes naming that GPU)
            job.update(nonaffine=True, expect_bounce=bool(gpu_xfer))
        self._drives(job, array)
        if io_is_read(job["io_type"]) and job["threads"] > self.files:
            job["file"] = target + "/gdsbench.0"
        spec = self.drive_spec.get(template["name"])
        if spec:
            job["spec"] = {"metric": spec[0], "value": float(spec[1]) * members}
        if gpu_xfer and self.skip_gpu:
            job["skip"] = self.skip_gpu
        if array.get("skip"):
            job["skip"] = array["skip"]
        return job

    def _drives(self, job, array):
        """The drives the job's watch reads: the array's, else the disk under the target directory.
        A simulated node's jobs run on the controller, in a directory of its tree: its array's
        members are the fixture's, the disk that carries the I/O is the controller's."""
        if not self.profile.get("live", True):
            if "far_mount" not in array:
                job["drives_from_target"] = True
        elif array.get("md") or array.get("members"):
            if array.get("md"):
                job["md"] = array["md"]
            if array.get("members"):
                job["members"] = list(array["members"])
        elif "far_mount" not in array:
            job["drives_from_target"] = True

    def array_jobs(self, array):
        """The array's singles, then its host read (the measured ceiling) and its non-affine read."""
        jobs, read, gain = self.jobs, self.read, self.profile.get("affinity_gain")
        label = self.labels[id(array)] = _label(array)
        gpus = list(array.get("gpus") or [])
        per_gpu = self.gpu_xfer and "far_mount" not in array and bool(gpus)
        # a CPU transfer type runs once per array: its data never reaches a GPU
        run = gpus if per_gpu else [gpus[0] if gpus else (self.all_gpus[0] if self.all_gpus else None)]
        for gpu in run:
            for template in self.templates:
                name = "%s gpu%s %s" % (label, gpu, template["name"]) if per_gpu else "%s %s" % (label, template["name"])
                jobs.append(self.single(array, gpu, template, name))
                self.singles[(gpu, id(array), template["name"])] = name
                if per_gpu:
                    self.home.setdefault((gpu, template["name"]), name)
        if read and gain and gpus and "far_mount" in array:
            jobs += _far_nic_jobs(jobs, array, label, read, self.templates, gain,
                                  None if self.gpu_xfer else CPU_REASON, self.skip_gpu or array.get("skip"))
            return
        if read and per_gpu and not self.skip_gpu and not array.get("skip"):
            # the measured ceiling: the same drives read into host memory, in the same run
            host = self.single(array, gpus[0], read, "%s %s host" % (label, read["name"]))
            host.update(xfer_type=HOST_XFER, gpu=None, expect_path=None, procs=1, thresholds={}, spec=None)
            jobs.append(host)
            self.hosts[id(array)] = host["name"]
            for gpu in gpus:
                _job(jobs, self.singles[(gpu, id(array), read["name"])])["ceiling"] = host["name"]
        if read and gain and gpus:
            self.nonaffine_read(array, label, run[0], [g for g in self.all_gpus if g not in gpus], gain)

    def nonaffine_read(self, array, label, first, others, gain):
        """The first read again from the farthest GPU of another group, and the ``compare`` of the
        first GPU's read with it (the guide's non-affine penalty made a check)."""
        jobs, read = self.jobs, self.read
        optimal = self.singles[(first, id(array), read["name"])]
        if not self.gpu_xfer or self.skip_gpu or not others:
            reason = (CPU_REASON if not self.gpu_xfer else self.skip_gpu or "every GPU is local to this array")
            jobs.append({"name": "%s %s non-affine" % (label, read["name"]), "skip": reason,
                         "thresholds": {"affinity_gain": gain}})
            return
        # Prefer the farthest GPU: another NUMA node shows the guide's penalty most clearly.
        numa = self.numa_of_gpu
        far = sorted(others, key=lambda g: (numa.get(g) == numa.get(first), g))[0]
        nonaffine_name = "%s %s non-affine gpu%d" % (label, read["name"], far)
        # the far GPU's data may land on a GPU near the drives first: what this job measures
        jobs.append(dict(_job(jobs, optimal), name=nonaffine_name, gpu=far, numa=numa.get(far),
                         thresholds={}, spec=None, expect_bounce=True, ceiling=None))
        _job(jobs, optimal)["compare"] = {"job": nonaffine_name, "metric": "throughput_gib_s",
                                          "as": "affinity_gain", "threshold": gain}

    def homeless_jobs(self):
        """Each GPU without an array of its own on its nearest array, judged as non-affine: {gpu: array}."""
        homes = {}
        for gpu in self.homeless:
            array = homes[gpu] = _nearest(gpu, self.local, self.profile.get("matrix"), self.numa_of_gpu)
            for template in self.templates:
                name = "%s gpu%d non-affine %s" % (self.labels[id(array)], gpu, template["name"])
                ceiling = {"ceiling": self.hosts[id(array)]} if template is self.read and id(array) in self.hosts else {}
                self.jobs.append(dict(self.single(array, gpu, template, name, own=False), **ceiling))
                self.singles[(gpu, id(array), template["name"])] = name
                self.home[(gpu, template["name"])] = name
        return homes

    def plan(self):
        for array in self.arrays:
            self.array_jobs(array)
        homes = self.homeless_jobs()
        if self.all_gpus and self.local and not self.gpu_xfer:
            reason = "%s: one job per array, not one per GPU" % CPU_REASON
            self.jobs += [{"name": "every GPU", "skip": reason}, {"name": "all GPUs at once", "skip": reason},
                          {"name": "host ceiling", "skip": "the CPU transfer type reads into host memory already: "
                                                           "its own jobs are what the drives give"}]
        elif self.gpu_xfer and self.local:
            self.jobs += _concurrent_jobs(self.local, homes, self.templates, self.read, self.home, self.hosts,
                                          self.labels, self.single, self.profile, self.concurrency, self.skip_gpu)
        return self.jobs


def gds_bench_plan(arrays, profile):
    """The gdsbench jobs of a node (docs/benchmark.md, How the role plans jobs)."""
    return _Plan(arrays, profile).plan()


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


def _xfer_words(numbers):
    """Transfer types as the docs say them (0 GPUD, 1 CPUONLY ...), from gdsbench's own vocabulary."""
    return ", ".join("%d %s" % (n, xfer_name(n)) for n in numbers)


# The role gds_bench: its variables, the one source of its defaults/main.yml, meta/argument_specs.yml
# and its table in docs/variables.md (make roles)
ROLE_SPEC = RoleSpec(
    'gds_bench', 'gds_bench_',
    short_description='Build gdsbench on the node and benchmark every array with its local GPUs',
    description=(),
    variables=[
        Var('gds_bench_source', 'path',
            'The benchmark sources on the controller (copied to the node and compiled there).',
            '{{ role_path }}/files/bench'),
        Var('gds_bench_build_root', 'path',
            'Where the sources are copied and built on the node, one directory per source hash.',
            on_node('/var/cache/gds-commission/bench')),
        Var('gds_bench_cuda_home', 'path',
            'CUDA toolkit on the node; without it gdsbench builds the CPU transfer types only.',
            '/usr/local/cuda'),
        Var('gds_bench_cufile_config', 'str',
            "cufile.json the benchmark uses (CUFILE_ENV_PATH_JSON); empty: the library's default.",
            "{{ gds_cufile_path | default('') }}"),
        Var('gds_bench_arrays', 'list',
            'Arrays to benchmark ({mount, gpus, members}); the gds_raid role sets gds_raid_arrays.',
            '{{ gds_raid_arrays | default([]) }}',
            elements='dict'),
        Var('gds_bench_target_dir', 'str',
            'A directory to benchmark when the node has no arrays (e.g. a GPU node with one data disk).',
            ''),
        Var('gds_bench_netfs', 'bool',
            'Benchmark the network mounts too: each GPU against the mount of its own NIC, and through a far NIC.',
            False),
        Var('gds_bench_netfs_mounts', 'list',
            "The network mounts (role gds_netfs's facts).",
            "{{ ansible_facts['gds_netfs']['mounts'] | default([]) }}",
            elements='dict'),
        Var('gds_bench_netfs_gpus', 'list',
            'GPUs to run on the network mounts; empty: the first GPU paired with each NIC that carries a mount.',
            [],
            elements='int'),
        Var('gds_bench_netfs_subdir', 'str',
            "Directory below each mount point that the jobs use (the guide's gds_dir).",
            'gds_dir'),
        Var('gds_bench_netfs_thresholds', 'dict',
            'Thresholds per job template on the network mounts (they depend on the storage servers: `{}` = measure '
            'only).',
            {}),
        Var('gds_bench_netfs_affinity_gain', 'list',
            'Own-NIC / far-NIC throughput of the first read job on the network mounts; [] = off.',
            []),
        Var('gds_bench_jobfile_dir', 'str',
            'Where to write one gdsio job file per template for the network mounts (`gdsio FILE`, `[global]` + '
            '`[jobN]` with numa_node, gpu_dev_id, num_threads, directory); empty: none.',
            ''),
        Var('gds_bench_xfer_type', 'int',
            'gdsio transfer type of the jobs (gdsbench --capabilities): %s.' % _xfer_words(xfer_types()),
            0,
            choices=xfer_types()),
        Var('gds_bench_fallback_xfer_type', 'int',
            'Transfer type used instead when no GPU can be used (simulated node, no driver): %s.'
            % _xfer_words(xfer_types(without="cufile")),
            1,
            choices=xfer_types(without="cufile")),
        Var('gds_bench_duration', 'int',
            'Seconds each job runs (short for drift-time smoke runs, minutes for commissioning).',
            60),
        Var('gds_bench_file_size', 'str',
            'Per-thread file size of each job.',
            '1G'),
        Var('gds_bench_jobs', 'list',
            'Job templates, run per array with each of its local GPUs (write first: reads need its files).',
            [{'name': 'seq_write', 'io_type': 'write', 'io_size': '1M', 'threads': 8},
             {'name': 'seq_read', 'io_type': 'read', 'io_size': '1M', 'threads': 8},
             {'name': 'rand_read', 'io_type': 'randread', 'io_size': '4K', 'threads': 32}],
            elements='dict'),
        Var('gds_bench_thresholds', 'dict',
            'Thresholds per job template: metric -> [reference, lower, upper, unit] (ReFrame style).',
            {}),
        Var('gds_bench_drive_spec', 'dict',
            'Per-drive spec per job template: [metric, value]; gives the fraction_of_spec metric.',
            {}),
        Var('gds_bench_affinity_gain', 'list',
            'Optimal / non-affine throughput of the first read job: [reference, lower, upper, unit]; [] = off.',
            [],
            elements='raw'),
        Var('gds_bench_nonaffine_thresholds', 'dict',
            'Thresholds per job template of a GPU measured on storage outside its affinity group (a GPU whose '
            'group has no array runs on the nearest one); `{}`: measured only '
            '([profiles.md](profiles.md#every-gpu)).',
            {}),
        Var('gds_bench_concurrent', 'bool',
            'Run every GPU at once (each on its own array, all on one array) after the single jobs '
            '([benchmark.md](benchmark.md#every-gpu-at-once)).',
            True),
        Var('gds_bench_concurrency', 'dict',
            'Every GPU at once: `own_array`, `one_array`, each `[reference, lower, upper, unit]` for the aggregate '
            'over the sum of the single-GPU figures; absent or `[]`: recorded, not judged.',
            {},
            options={'own_array': {'type': 'list',
                                   'elements': 'raw',
                                   'description': 'Each GPU on its own array; [reference, lower, upper, unit], [] '
                                                  'off.'},
                     'one_array': {'type': 'list',
                                   'elements': 'raw',
                                   'description': 'All GPUs on one array; [reference, lower, upper, unit], [] off.'}}),
        Var('gds_bench_expect_path', 'str',
            'The I/O path GPU-direct jobs must take: nvfs, p2pdma or compat.',
            'nvfs',
            choices=('nvfs', 'p2pdma', 'compat')),
        Var('gds_bench_timeout_grace', 'int',
            'Seconds a job may run past its duration before it is killed.',
            60),
        Var('gds_bench_keep_files', 'bool',
            'Keep the data files the jobs wrote (e.g. 8 x 1 GiB per array); false removes what this run created '
            "after the last job, never a file that existed before (a user's file given as target).",
            False),
        Var('gds_bench_poll_interval', 'int',
            'Above 0: the benchmark runs in the background and the console shows each job as it starts and ends '
            '(job N of M, its GPU and transfer type, at its end the verdict and the seconds it took of those '
            'expected; `gds_bench_progress`), its progress read on the node at most every this many seconds and '
            'every second at least. 0: it runs in the foreground, one line at its end.',
            10),
        Var('gds_bench_health_thresholds', 'dict',
            'Device health limits, set per platform profile: `aer_correctable_limit` (correctable AER errors per '
            'device during the run above it WARN), `nvme_percentage_used_max` (FAIL above), '
            '`nvme_temperature_max_c` (WARN above), `gpu_throttle_fail` / `gpu_throttle_warn` (clock event reasons '
            'during the run: hw_thermal, hw_power_brake, hw_slowdown, sw_thermal, sw_power_cap, ...), '
            '`gpu_remapped_rows_pending` (pending remapped rows or retired pages FAIL when true, WARN when false).',
            {'aer_correctable_limit': 0,
             'nvme_percentage_used_max': 90,
             'nvme_temperature_max_c': 70,
             'gpu_throttle_fail': ['hw_thermal', 'hw_power_brake'],
             'gpu_throttle_warn': ['sw_thermal', 'hw_slowdown'],
             'gpu_remapped_rows_pending': True},
            options={'aer_correctable_limit': {'type': 'int',
                                               'description': 'Correctable AER errors per device during the run '
                                                              'above this WARN.'},
                     'nvme_percentage_used_max': {'type': 'int',
                                                  'description': 'NVMe SMART percentage used above this FAILs.'},
                     'nvme_temperature_max_c': {'type': 'int',
                                                'description': 'NVMe temperature after the run above this WARNs.'},
                     'gpu_throttle_fail': {'type': 'list',
                                           'elements': 'str',
                                           'description': 'Clock event reasons during the run that FAIL.'},
                     'gpu_throttle_warn': {'type': 'list',
                                           'elements': 'str',
                                           'description': 'Clock event reasons during the run that WARN.'},
                     'gpu_remapped_rows_pending': {'type': 'bool',
                                                   'description': 'Pending remapped rows or retired pages FAIL '
                                                                  '(false WARN).'}}),
        Var('gds_bench_watch', 'dict',
            'What the watch of every job judges, set per platform profile ([profiles.md](profiles.md#watch)): '
            '`drive_skew_tolerance`, `drive_await_tolerance`, `drive_skew_verdict`, `path_fraction_min`, '
            '`ceiling_fraction_min`, `bounce_share`, `bounce_verdict`.',
            {'drive_skew_tolerance': 0.25,
             'drive_await_tolerance': 1.0,
             'drive_skew_verdict': 'WARN',
             'path_fraction_min': None,
             'ceiling_fraction_min': None,
             'bounce_share': 0.5,
             'bounce_verdict': 'WARN'},
            options={'drive_skew_tolerance': {'type': 'float',
                                              'description': "A member's bytes off its peers' mean by more than this "
                                                             'share.'},
                     'drive_await_tolerance': {'type': 'float',
                                               'description': "A member's mean service time above its peers' by more "
                                                              'than this share.'},
                     'drive_skew_verdict': {'type': 'str',
                                            'choices': ['WARN', 'FAIL'],
                                            'description': 'The verdict of a skewed member.'},
                     'path_fraction_min': {'type': 'float',
                                           'description': "Measured / the path's PCIe limit below this FAILs; null: "
                                                          'off.'},
                     'ceiling_fraction_min': {'type': 'float',
                                              'description': 'Measured / the same drives read into host memory below '
                                                             'this FAILs; null: off.'},
                     'bounce_share': {'type': 'float',
                                      'description': "Another GPU that received this share of a job's bytes carried "
                                                     'them.'},
                     'bounce_verdict': {'type': 'str',
                                        'choices': ['WARN', 'FAIL'],
                                        'description': 'The verdict of a bounce GPU.'}}),
        Var('gds_bench_health_nvme', 'bool',
            "Read the data drives' SMART health before and after the jobs (`nvme: health <dev>` checks).",
            True),
        Var('gds_bench_p2pdma_probe', 'bool',
            'After the jobs, module `gds_p2pdma_probe`: a probe file of each array read with O_DIRECT into the '
            "memory of every function that publishes p2pmem (NVMe controller memory buffers), the kernel's answer "
            'held against the P2PDMA prediction (`p2pdma: <array> into <bdf>` checks; [p2pdma.md](p2pdma.md)). It '
            'writes a file per array; on a node without a provider (a simulated one) one SKIP check.',
            False),
        Var('gds_bench_nvme_cli', 'str',
            'nvme-cli on the node (`smart-log -o json`); absent: the temperature from sysfs only.',
            'nvme'),
    ],
    shared=(),
)
