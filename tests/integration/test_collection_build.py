"""What `ansible-galaxy collection build` packs: the collection, never the benchmark's lab
(bench/ at the repository root: GPU-machine scripts, RESULTS.md, the cuFile probe). The gds_bench
role ships gdsbench's C sources, its Makefile and README, and nothing built."""
import os
import subprocess
import sys
import tarfile

from conftest import COLLECTION

SHIPPED = ("Makefile", "README.md")


def test_the_tarball_holds_gdsbench_sources_and_no_lab_file(tmp_path):
    galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    proc = subprocess.run([galaxy, "collection", "build", COLLECTION, "--output-path", str(tmp_path), "--force"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tarball,) = tmp_path.glob("*.tar.gz")
    with tarfile.open(str(tarball)) as tar:
        names = [m.name for m in tar.getmembers() if m.isfile()]
    bench = [n for n in names if n.startswith("roles/gds_bench/files/")]
    assert any(n.endswith("/main.c") for n in bench), bench
    odd = [n for n in bench if not (n.startswith("roles/gds_bench/files/bench/") and "/" not in n[len(
        "roles/gds_bench/files/bench/"):] and (n.endswith((".c", ".h")) or os.path.basename(n) in SHIPPED))]
    assert not odd, "not gdsbench's sources: %s" % odd
    lab = [n for n in names if any(word in n for word in (
        "side_by_side", "gpu_lib", "gpu_validate", "RESULTS.md", "cufile_probe", "watch_overhead",
        "nvml_pcie_probe", "compare_fio", "parity"))]
    assert not lab, "lab files in the collection: %s" % lab
