# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter ``gds_bench_plan``: the benchmark jobs of a node from its arrays and its profile.

For every array (a mount and the GPUs local to it): the profile's job templates with the array's
first GPU (the optimal pair), in template order (the write that creates the files first), then the
first read template again from a GPU of another group (non-affine), and a ``compare`` on the
optimal read: optimal/non-affine throughput, the guide's 40 % penalty made a check.
"""
from __future__ import annotations

DOCUMENTATION = r"""
name: gds_bench_plan
short_description: Plan gdsbench jobs for a node's arrays
description: Builds the job list the gds_bench module runs, from the arrays and the profile.
positional: _input
options:
  _input:
    description: The arrays, C([{mount, gpus, members, device}]).
    type: list
    required: true
  profile:
    description: C({templates, thresholds, drive_spec, expect_path, xfer_type, affinity_gain, size,
      duration, gpu_indices, numa_of_gpu, run_gpu, skip_reason}).
    type: dict
    required: true
"""

GPU_XFER = (0, 2, 4, 5, 6)


def _first_read(templates):
    return next((t for t in templates if t.get("io_type", "read") == "read"), None)


def gds_bench_plan(arrays, profile):
    templates = list(profile.get("templates") or [])
    templates.sort(key=lambda t: 0 if t.get("io_type") in ("write", "randwrite") else 1)
    thresholds = profile.get("thresholds") or {}
    drive_spec = profile.get("drive_spec") or {}
    xfer = int(profile.get("xfer_type", 0))
    gpu_xfer = xfer in GPU_XFER
    all_gpus = list(profile.get("gpu_indices") or [])
    numa_of_gpu = {int(k): v for k, v in (profile.get("numa_of_gpu") or {}).items()}
    skip_gpu = None if profile.get("run_gpu", True) else (profile.get("skip_reason") or "no usable GPU")
    # -D reads use the per-thread files of the write job (gdsbench.<thread>, as gdsio does): a
    # read with more threads than the write made shares one file instead (-f).
    writers = [int(t.get("threads", 8)) for t in templates if t.get("io_type") in ("write", "randwrite")]
    files = max(writers) if writers else 0
    jobs = []
    for array in arrays:
        label = array["mount"].rstrip("/").split("/")[-1] or "array"
        gpus = list(array.get("gpus") or [])
        gpu = gpus[0] if gpus else (all_gpus[0] if all_gpus else None)
        target = array["mount"].rstrip("/") + "/gds-bench"
        members = len(array.get("members") or []) or 1
        for template in templates:
            name = "%s %s" % (label, template["name"])
            job = {
                "name": name, "target": target, "gpu": gpu if gpu_xfer else None,
                "numa": numa_of_gpu.get(gpu) if gpu is not None else None,
                "xfer_type": xfer, "io_type": template.get("io_type", "read"),
                "io_size": template.get("io_size", "1M"), "threads": int(template.get("threads", 8)),
                "size": template.get("size", profile.get("size", "1G")),
                "duration": int(template.get("duration", profile.get("duration", 30))),
                "thresholds": thresholds.get(template["name"], {}),
                "expect_path": profile.get("expect_path") if gpu_xfer else None,
                # worker processes: a template's own value, else gdsbench's default (processes for
                # large sequential cuFile I/O, threads for small or random I/O: bench/RESULTS.md)
                "procs": (None if template.get("procs") is None else int(template["procs"])) if gpu_xfer else 1,
            }
            if job["io_type"] in ("read", "randread") and job["threads"] > files:
                job["file"] = target + "/gdsbench.0"
            spec = drive_spec.get(template["name"])
            if spec:
                job["spec"] = {"metric": spec[0], "value": float(spec[1]) * members}
            if gpu_xfer and skip_gpu:
                job["skip"] = skip_gpu
            jobs.append(job)
        read = _first_read(templates)
        others = [g for g in all_gpus if g not in gpus]
        gain = profile.get("affinity_gain")
        if read and gain and gpus:
            optimal = "%s %s" % (label, read["name"])
            if not gpu_xfer or skip_gpu or not others:
                reason = ("the CPU transfer type does not touch a GPU" if not gpu_xfer
                          else skip_gpu or "every GPU is local to this array")
                jobs.append({"name": "%s non-affine" % optimal, "skip": reason,
                             "thresholds": {"affinity_gain": gain}})
                continue
            # Prefer the farthest GPU: another NUMA node shows the guide's penalty most clearly.
            others.sort(key=lambda g: (numa_of_gpu.get(g) == numa_of_gpu.get(gpu), g))
            far = others[0]
            nonaffine = "%s non-affine gpu%d" % (optimal, far)
            jobs.append(dict(next(j for j in jobs if j["name"] == optimal), name=nonaffine, gpu=far,
                             numa=numa_of_gpu.get(far), thresholds={}, spec=None))
            for job in jobs:
                if job["name"] == optimal:
                    job["compare"] = {"job": nonaffine, "metric": "throughput_gib_s",
                                      "as": "affinity_gain", "threshold": gain}
    return jobs


class FilterModule(object):
    def filters(self):
        return {"gds_bench_plan": gds_bench_plan}
