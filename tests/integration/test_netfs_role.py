"""The gds_netfs role on simulated DGX-2 nodes with network mounts: its validate entry point, the
checks it records, and the opt-in fstab entries. One ansible-playbook run, one host per case."""
import os
import sys

import simtree
import yaml
from conftest import run_playbook_json, task_results

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)

PLAY = """
- name: Audit the network mounts
  hosts: all
  gather_facts: false
  tasks:
    - name: Check the variables
      ansible.builtin.include_role:
        name: gds.commission.gds_netfs
        tasks_from: validate
    - name: Discover the topology
      gds.commission.gds_topology:
        sysfs_root: "{{ gds_root }}/sys"
        procfs_root: "{{ gds_root }}/proc"
    - name: Audit
      ansible.builtin.include_role:
        name: gds.commission.gds_netfs
    - name: Recorded
      ansible.builtin.debug:
        msg: "{{ gds_netfs_checks.checks }}"
"""

# /proc/mounts lines (the fallback when there is no mountinfo: options all in one field)
RDMA = ("192.168.10.5:/export/a /mnt/nfs/ib0/data/0 nfs rw,relatime,vers=3,rsize=1048576,"
        "wsize=1048576,namlen=255,hard,proto=rdma,port=20049,timeo=600,retrans=2,sec=sys,"
        "mountaddr=192.168.10.5,mountvers=3,mountproto=tcp,local_lock=none,addr=192.168.10.5 0 0\n")
TCP = ("192.168.10.5:/export/a /mnt/data nfs4 rw,relatime,vers=4.2,rsize=1048576,wsize=1048576,"
       "namlen=255,hard,proto=tcp,timeo=600,retrans=2,sec=sys,clientaddr=192.168.10.20,"
       "local_lock=none,addr=192.168.10.5 0 0\n")
ROUTE = ("Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
         "ib0\t000AA8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n")
ENTRY = {"client_if": "ib0", "server": "192.168.10.5", "export": "/export/a", "server_index": 0}

HOSTS = {
    "rdma": (RDMA, {"gds_netfs_expect_rdma": True, "gds_netfs_tcp_verdict": "FAIL",
                    "gds_netfs_manage_mounts": True, "gds_netfs_mounts": [ENTRY]}),
    "tcp": (TCP, {"gds_netfs_expect_rdma": True, "gds_netfs_tcp_verdict": "FAIL"}),
    "none": ("", {}),
    "bad-map": (RDMA, {"gds_netfs_gpu_map": {"/mnt/nfs/ib0/data/0": "0,1"}}),
    "bad-entry": (RDMA, {"gds_netfs_mounts": [dict(ENTRY, client_if="ib0 /etc")]}),
    "bad-verdict": (RDMA, {"gds_netfs_far_verdict": "ERROR"}),
    "bad-root": (RDMA, {"gds_netfs_mount_root": "/etc/nfs"}),
}


def run(tmp_path):
    inventory = {"all": {"hosts": {}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "gds_live": False}}}
    roots = {}
    for host, (mounts, hostvars) in HOSTS.items():
        root = simtree.build("dgx2", str(tmp_path / "sim" / host))
        with open(os.path.join(root, "proc", "mounts"), "a") as out:
            out.write(mounts)
        os.makedirs(os.path.join(root, "proc", "net"), exist_ok=True)
        with open(os.path.join(root, "proc", "net", "route"), "w") as out:
            out.write(ROUTE)
        os.makedirs(os.path.join(root, "etc"), exist_ok=True)
        roots[host] = root
        inventory["all"]["hosts"][host] = dict(hostvars, gds_root=root)
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAY)
    _, data, _ = run_playbook_json(tmp_path / "hosts.yml", tmp_path / "play.yml", timeout=600)
    results = {host: {"failed": None, "checks": None} for host in HOSTS}
    for name, host, res in task_results(data):
        if res.get("failed") and results[host]["failed"] is None:
            results[host]["failed"] = str(res.get("msg"))
        if name == "Recorded":
            results[host]["checks"] = {c["name"]: c for c in res["msg"]}
    return results, roots


def test_role_checks_mounts_and_refuses_bad_variables(tmp_path):
    results, roots = run(tmp_path)
    rdma = results["rdma"]
    assert rdma["failed"] is None, rdma
    assert rdma["checks"]["netfs: /mnt/nfs/ib0/data/0 transport"]["verdict"] == "PASS"
    assert rdma["checks"]["netfs: /mnt/nfs/ib0/data/0 NIC affinity"]["verdict"] == "PASS"
    fstab = open(os.path.join(roots["rdma"], "etc", "fstab")).read()
    assert "192.168.10.5:/export/a /mnt/nfs/ib0/data/0 nfs vers=3,proto=rdma,port=20049" in fstab
    tcp = results["tcp"]["checks"]["netfs: /mnt/data transport"]
    assert (tcp["verdict"], tcp["actual"]) == ("FAIL", "tcp")
    assert not os.path.exists(os.path.join(roots["tcp"], "etc", "fstab"))  # not opted in
    assert [c["verdict"] for c in results["none"]["checks"].values()] == ["SKIP"]
    assert "gds_netfs_gpu_map" in results["bad-map"]["failed"]
    assert "gds_netfs_mounts[0]" in results["bad-entry"]["failed"]
    assert "gds_netfs_far_verdict" in results["bad-verdict"]["failed"]
    assert "gds_netfs_mount_root" in results["bad-root"]["failed"]
    for host in ("bad-map", "bad-entry", "bad-verdict", "bad-root"):
        assert results[host]["checks"] is None, host
