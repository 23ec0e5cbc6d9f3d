# -*- coding: utf-8 -*-
# Copyright: gds-commission contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every GPU of a node: measured alone, measured all at once, and against what the drives give.

The GDS guide's point about affinity is that GPUs reading at once through one switch or one root
port are bound by it. A concurrent job (gds_bench's job with ``jobs``, one gdsbench process
running a gdsio job file) is read three ways here:

- ``concurrent_limit``: what the PCIe links carry when the jobs run together. Each job's own
  limit comes from measure/pathlimit.py; a link that several jobs cross carries their shares of it
  (an md RAID0 member an equal share of its array's job, a GPU's link all of its job), and the
  link whose share of the demand is the largest against its rate scales every job down alike (the
  links share fairly). That link is ``bound``; the root complex is named where paths share it,
  never modelled. Unknown when a job's own path is unknown, with every shared element named.
- ``concurrency_entry``: the aggregate against the sum of each GPU's single-job figure (the same
  template, alone, on its own array), per sub-job, per affinity group and per root port, each
  with the limit of its part.
- ``ceiling_entry``: a GPU job against the same drives read with plain O_DIRECT into host memory
  in the same run (transfer type 1): "the GPU path at x % of what the drives give".

``every_gpu_check``: a node is signed off for every GPU or not at all. Pure: no I/O here.
"""
from __future__ import annotations

import json

from ansible_collections.gds.commission.plugins.module_utils.core.checks import check
from ansible_collections.gds.commission.plugins.module_utils.core.numbers import figure, ratio
from ansible_collections.gds.commission.plugins.module_utils.hw.health import KIND_ROLES, PORT_ROLES
from ansible_collections.gds.commission.plugins.module_utils.measure.pathlimit import (
    GIB, PathLoop, PathModel, PathUnknown, host_bridge, path_limit, route_links,
)
from ansible_collections.gds.commission.plugins.module_utils.measure.thresholds import evaluate, lookup_metric


def _gb(value):
    return None if value is None else round(value / 1e9, 3)


def _role(model, bdf):
    entry = model.links.get(bdf) or {}
    if entry.get("kind") == "bridge":
        return PORT_ROLES.get(entry.get("port"), "bridge")
    return KIND_ROLES.get(entry.get("kind"), entry.get("kind") or "device")


def parts_of(job, drives=()):
    """[{name, gpu, drives}] of a concurrent job's sub-jobs: each one's GPU (None: host memory)
    and drives (its array's members, else the drives the job's watch found under the target)."""
    return [{"name": sub.get("name"), "gpu": sub.get("gpu"), "drives": list(sub.get("members") or drives or [])}
            for sub in job.get("jobs") or [] if isinstance(sub, dict)]


def concurrent_limit(topology, parts, gpu_load=None):
    """What the PCIe links carry for ``parts`` ([{name, gpu, drives}]) running at once:
    {bytes_per_s, gb_s, gib_s, bound, jobs, shared, note?} or {unknown, jobs, shared}. ``jobs``
    holds each part's own limit, ``shared`` every element two or more parts cross: a link (its
    rate, the demand on it, which parts) or a host bridge (the root complex, not modelled)."""
    topology = topology or {}
    if not topology.get("pcie_links"):
        return {"unknown": "no PCIe links in the topology facts", "jobs": [], "shared": []}
    model = PathModel(topology.get("pcie_links"), gpu_load)
    rows, crossing, unknown = [], {}, []
    for part in parts:
        own = path_limit(topology, part["gpu"], part["drives"], gpu_load)
        row = {"name": part["name"], "gpu": part["gpu"], "drives": part["drives"]}
        if "unknown" in own:
            row["unknown"] = own["unknown"]
            unknown.append(row)
        else:
            row.update(gb_s=own["gb_s"], bound=own["bound"], bytes_per_s=own["bytes_per_s"])
        try:
            shares, complexes = route_links(topology, part["gpu"], part["drives"])
        except (PathLoop, PathUnknown):
            shares, complexes = {}, []
        for element, share in list(shares.items()) + [(c, None) for c in complexes]:
            crossing.setdefault(element, []).append((row, share))
        rows.append(row)
    shared, scale, bound = [], 1.0, None
    for element in sorted(crossing):
        users = crossing[element]
        if len(users) < 2:
            continue
        entry = {"element": element, "jobs": [row["name"] for row, dummy in users]}
        if element.startswith("pci"):  # a host bridge: the root complex, not modelled
            entry.update(what="root complex (host bridge %s)" % element, gb_s=None, demand_gb_s=None,
                         note="not modelled: an upper bound only")
            shared.append(entry)
            continue
        link = model.link(element)
        entry.update(what="%s %s" % (_role(model, element), element), gb_s=_gb(link["bytes_per_s"]),
                     gen=link["gen"], width=link["width"], note=link["note"], demand_gb_s=None)
        if link["bytes_per_s"] is not None and not unknown:
            demand = sum(row["bytes_per_s"] * share for row, share in users)
            entry["demand_gb_s"] = _gb(demand)
            if demand > 0 and link["bytes_per_s"] / demand < scale:
                scale, bound = link["bytes_per_s"] / demand, entry
        shared.append(entry)
    for row in rows:
        row.pop("bytes_per_s", None)
    complexes = [e["element"] for e in shared if e["element"].startswith("pci")]
    if unknown:
        reasons = {}
        for row in unknown:  # one reason for the parts that share it (the same drive's link)
            reasons.setdefault(row["unknown"], []).append(row["name"])
        return {"unknown": "; ".join("the path of %s: %s" % (", ".join(names), why) for why, names in reasons.items()),
                "jobs": rows, "shared": shared}
    total = sum(p["gb_s"] for p in rows) * 1e9
    limit = total * scale
    out = {"bytes_per_s": round(limit), "gb_s": _gb(limit), "gib_s": round(limit / GIB, 3), "jobs": rows,
           "shared": shared, "sum_gb_s": _gb(total),
           "bound": ("a link the GPUs share, %s: %s GB/s for %s GB/s of demand"
                     % (bound["what"], bound["gb_s"], bound["demand_gb_s"]) if bound is not None
                     else "each GPU's own path (no link they share binds)")}
    if complexes:
        out["root_complex"] = complexes
        out["note"] = ("the paths share the root complex (%s): it and the link between sockets are not modelled, "
                       "the limit is an upper bound" % ", ".join(complexes))
    return out


def root_port_of(topology, gpu):
    """The root port above a GPU (the top of its chain in pcie_links), or the host bridge of a
    GPU on the root bus itself (a VM): the element that groups GPUs in the per-root-port view."""
    gpu_bdf = next((g.get("bdf") for g in (topology or {}).get("gpus") or [] if isinstance(g, dict)
                    and g.get("index") == gpu), None)
    model = PathModel((topology or {}).get("pcie_links"))
    try:
        chain = model.chain(gpu_bdf)
    except PathLoop:
        chain = []
    if not chain:
        return None
    top = model.links[chain[-1]]
    if top.get("kind") == "bridge":
        return "root port %s" % chain[-1]
    return "host bridge %s (on the root bus)" % host_bridge(chain[-1])


def group_of(topology, gpu):
    group = next((g for g in (topology or {}).get("groups") or [] if isinstance(g, dict)
                  and gpu in (g.get("gpus") or [])), None)
    return None if group is None else "affinity group %s" % group.get("id")


def _throughput(record):
    return figure(lookup_metric(record or {}, "throughput_gib_s"))


HOST_MEMORY = "host memory (no GPU)"


def _bucket(key, rows, parts, topology, gpu_load):
    """The aggregate of some sub-jobs against the sum of their singles and their part's limit."""
    aggregate = [r["gib_s"] for r in rows]
    singles = [r["single_gib_s"] for r in rows]
    out = {"key": key, "gpus": [r["gpu"] for r in rows if r["gpu"] is not None],
           "aggregate_gib_s": round(sum(aggregate), 4) if None not in aggregate else None,
           "singles_gib_s": round(sum(singles), 4) if None not in singles and singles else None}
    scaling = ratio(out["aggregate_gib_s"], out["singles_gib_s"])
    out["scaling"] = None if scaling is None else round(scaling, 4)
    limit = concurrent_limit(topology, parts, gpu_load)
    out["limit_gb_s"] = limit.get("gb_s")
    out["bound"] = limit.get("bound") or "unknown: %s" % limit.get("unknown")
    out["shared"] = [e["what"] for e in limit.get("shared") or []]
    return out


def concurrency_entry(job, record, records, topology=None, gpu_load=None, drives=()):
    """``watch.concurrency`` of a concurrent job that completed: {aggregate_gib_s, singles_gib_s,
    scaling, jobs, groups, root_ports, unknown?}. ``records`` holds the records of the jobs that
    completed, by name; a sub-job's single is the figure the same GPU reached alone."""
    subs = [s for s in job.get("jobs") or [] if isinstance(s, dict)]
    per_job = (record or {}).get("jobs")
    if not isinstance(per_job, list) or len(per_job) != len(subs):
        return {"unknown": "the record has %s per-job results for %d sub-jobs"
                % (len(per_job) if isinstance(per_job, list) else "no", len(subs))}
    rows, missing = [], []
    for sub, rec in zip(subs, per_job):
        single = sub.get("single")
        row = {"name": sub.get("name"), "gpu": sub.get("gpu"), "array": sub.get("array"),
               "gib_s": _throughput(rec if isinstance(rec, dict) else {}), "single": single,
               "single_gib_s": _throughput(records.get(single)) if single else None}
        if row["single_gib_s"] is None:
            missing.append("%s (%s)" % (row["name"], "no single job to compare" if not single else
                                        "%s did not complete" % single if single not in records else
                                        "%s has no throughput" % single))
        rows.append(row)
    aggregate = _throughput(record)
    singles = None if missing else round(sum(r["single_gib_s"] for r in rows), 4)
    scaling = ratio(aggregate, singles)
    out = {"aggregate_gib_s": aggregate, "singles_gib_s": singles,
           "scaling": None if scaling is None else round(scaling, 4), "jobs": rows}
    if scaling is None and aggregate is not None and singles is not None:
        out["unknown"] = "the singles' sum (%s GiB/s) is no figure to divide by" % singles
    if missing:
        out["unknown"] = "no single figure for %s" % ", ".join(missing)
    parts = {p["name"]: p for p in parts_of(job, drives)}
    for title, key_of in (("groups", group_of), ("root_ports", root_port_of)):
        buckets = {}
        for row in rows:
            # a read into host memory (the ceiling's run) crosses no GPU's link: one bucket of its own
            key = key_of(topology, row["gpu"]) if row["gpu"] is not None else HOST_MEMORY
            buckets.setdefault(key or "unknown", []).append(row)
        out[title] = [_bucket(key, members, [parts[r["name"]] for r in members], topology, gpu_load)
                      for key, members in sorted(buckets.items())]
    return out


def scaling_check(prefix, entry, threshold):
    """``bench: <job>: scaling``: the aggregate of every GPU at once over the sum of each GPU's
    single figure, against the profile's gds_bench_concurrency entry for the run."""
    entry = entry if isinstance(entry, dict) else {}
    value = entry.get("scaling")
    if value is None:
        return check(prefix + "scaling", "SKIP", None, "unknown",
                     "not judged: %s" % (entry.get("unknown") or "no aggregate or no sum of singles"))
    out = evaluate("scaling", threshold, value, prefix)
    out["detail"] = "; ".join(p for p in (out.get("detail"), "aggregate %s GiB/s over the singles' %s GiB/s" % (
        entry.get("aggregate_gib_s"), entry.get("singles_gib_s"))) if p)
    return out


def ceiling_entry(record, host_name, host_record):
    """``watch.ceiling``: the job's throughput over the host-memory read of the same drives in the
    same run (``host_name``'s record; None: it did not complete)."""
    mine, host = _throughput(record), _throughput(host_record)
    out = {"job": host_name, "gib_s": host}
    if host_record is None:
        out["unknown"] = "%s did not complete" % host_name
    elif ratio(mine, host) is None:
        out["unknown"] = "no throughput to compare (%s: %s, this job: %s)" % (host_name, host, mine)
    else:
        out["fraction"] = round(ratio(mine, host), 4)
    return out


def ceiling_check(prefix, entry, minimum):
    """``bench: <job>: ceiling_fraction``: the GPU path's share of what the drives give to host
    memory, against the profile's ``ceiling_fraction_min``."""
    expected = ">= %g of the host read" % minimum
    entry = entry if isinstance(entry, dict) else {}
    fraction = entry.get("fraction")
    if fraction is None:
        return check(prefix + "ceiling_fraction", "SKIP", expected, "unknown",
                     "the ceiling is unknown: %s" % (entry.get("unknown") or "no host read"))
    out = evaluate("ceiling_fraction", [minimum, 0.0, None, "of the host read"], fraction, prefix)
    out["detail"] = "; ".join(p for p in (out.get("detail"), "host read %s: %s GiB/s" % (entry.get("job"), entry.get("gib_s")))
                              if p)
    return out


def every_gpu_check(expected, jobs, results):
    """``bench: every GPU measured``: each GPU of the node (``expected``, from the topology) had a
    job of its own that completed. A GPU without one FAILs the node, named with why (no job was
    planned for it, its jobs broke or were skipped). None without ``expected`` or when no job of
    the plan uses a GPU (a CPU transfer type). The planner's non-affine comparison read (an
    ``expect_bounce`` job that is not ``nonaffine``) is no GPU's own job."""
    gpu_jobs = [j for j in jobs if isinstance(j, dict) and j.get("gpu") is not None and not j.get("jobs")
                and (j.get("nonaffine") or not j.get("expect_bounce"))]
    if not gpu_jobs or not expected:
        return None
    done = {r.get("name") for r in results if isinstance(r, dict) and isinstance(r.get("checks"), list)
            and r["checks"] and isinstance(r["checks"][0], dict) and r["checks"][0].get("verdict") == "PASS"}
    given = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    expected = sorted({g for g in given if _index(g)} | {j["gpu"] for j in gpu_jobs if _index(j["gpu"])})
    # a GPU is measured when every job of its own that ran completed: one broken job of three is
    # not a measured GPU
    measured, why = [], ["%s is no GPU index (a whole number): it cannot be counted" % json.dumps(g, default=str)
                         for g in given if not _index(g)]
    for gpu in expected:
        mine = [j for j in gpu_jobs if j["gpu"] == gpu]
        ran = [j for j in mine if not j.get("skip")]
        broken = [j.get("name") for j in ran if j.get("name") not in done]
        if not mine:
            why.append("GPU %s: no job was planned for it" % gpu)
        elif not ran:
            why.append("GPU %s: its jobs were skipped (%s)" % (gpu, "; ".join(sorted({j["skip"] for j in mine}))))
        elif broken:
            why.append("GPU %s: %d of its %d jobs did not complete (%s)" % (gpu, len(broken), len(ran), ", ".join(map(str, broken))))
        else:
            measured.append(gpu)
    name = "bench: every GPU measured"
    target = "every GPU: %s" % ", ".join(str(g) for g in expected)
    if not measured and all(j.get("skip") for j in gpu_jobs) and all(_index(g) for g in given):
        return check(name, "SKIP", target, "none", "; ".join(why))
    if why:
        return check(name, "FAIL", target, "%d of %d: %s" % (len(measured), len(expected), ", ".join(map(str, measured))),
                     "a node is signed off for every GPU or not at all: %s" % "; ".join(why))
    # a GPU of the node that is no index (unknown) could be the one not measured: never PASS
    return check(name, "PASS", target, "%d of %d" % (len(measured), len(expected)), inputs={"expected": given})


def _index(value):
    """Whether ``value`` is a GPU index: a whole number >= 0 (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
