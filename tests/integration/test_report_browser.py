"""report.html renders in a real browser (headless Chromium), offline."""
import os
import shutil
import struct
import subprocess

import pytest

from ansible.module_utils.gds_report import host_document, render_html, summary
from conftest import ROOT

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(not BROWSER, reason="chromium is not installed (make test installs Debian's chromium)")
def test_report_renders_to_a_screenshot(tmp_path):
    checks = [{"name": "bench: raid1 seq_read: throughput_gib_s", "verdict": "PASS", "expected": ">= 5.4 GiB/s",
               "actual": 6.5, "low": 5.4, "unit": "GiB/s"},
              {"name": "acs: 0000:04:10.0", "verdict": "FAIL", "expected": "0x0000", "actual": "0x001d"}]
    docs = {"node1": host_document("node1", {"checks": checks}, {})}
    page = tmp_path / "report.html"
    page.write_text(render_html(summary("r1", "s", "f", docs), docs))
    png = tmp_path / "report.png"
    proc = subprocess.run([os.path.join(ROOT, "scripts", "screenshot-report.sh"), str(page), str(png), "900", "700"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (900, 700)
    assert len(data) > 10000  # a blank page compresses to a few hundred bytes
