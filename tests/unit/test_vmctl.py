"""scripts/vm/vmctl.py without QEMU: the QMP messages it sends and the throttle subcommand.

A fake QMP server on the run directory's socket answers as QEMU 7.2 does (query-block's shape as
QEMU 7.2 printed it for `-drive if=none,id=drv-X -device nvme,drive=drv-X` with no device id)."""
import json
import os
import socket
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts", "vm"))

import vmctl  # noqa: E402

LIMITS = ("bps", "bps_rd", "bps_wr", "iops", "iops_rd", "iops_wr")


def _block(serial, qdev, limits=None):
    inserted = {"file": "%s.qcow2" % serial, "drv": "qcow2", "ro": False}
    inserted.update({k: (limits or {}).get(k, 0) for k in LIMITS})
    return {"device": "drv-" + serial, "qdev": qdev, "type": "unknown", "locked": False,
            "removable": False, "inserted": inserted}


class FakeQemu(object):
    """Answers QMP on vmctl's socket path for run_dir: every message it got is in .sent."""

    def __init__(self, run_dir):
        self.sent, self.limits = [], {}
        self.blocks = {"gds-sw1-a": "/machine/peripheral-anon/device[3]",
                       "gds-sw1-b": "/machine/peripheral-anon/device[5]"}
        self.path = str(vmctl.qmp_path(run_dir))
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def answer(self, msg):
        if msg["execute"] == "query-block":
            return {"return": [_block(s, q, self.limits.get(q)) for s, q in self.blocks.items()]}
        if msg["execute"] == "block_set_io_throttle":
            args = msg["arguments"]
            missing = [k for k in LIMITS if k not in args]
            if missing:  # QEMU 7.2: every limit is required
                return {"error": {"class": "GenericError", "desc": "Parameter '%s' is missing" % missing[0]}}
            if args.get("id") not in self.blocks.values():
                return {"error": {"class": "DeviceNotFound", "desc": "Device '%s' not found" % args.get("id")}}
            self.limits[args["id"]] = {k: args[k] for k in LIMITS}
        return {"return": {}}

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                f = conn.makefile("rw")
                f.write(json.dumps({"QMP": {"version": {"qemu": {"major": 7, "minor": 2}}}}) + "\n")
                f.flush()
                for line in f:
                    msg = json.loads(line)
                    self.sent.append(msg)
                    f.write(json.dumps({"event": "NOISE"}) + "\n")  # events are skipped
                    f.write(json.dumps(self.answer(msg)) + "\n")
                    f.flush()

    def close(self):
        self.sock.close()
        os.unlink(self.path)


@pytest.fixture
def qemu(tmp_path):
    (tmp_path / "qemu.pid").write_text("%d\n" % os.getpid())  # "running"
    fake = FakeQemu(tmp_path)
    yield fake
    fake.close()


def test_qmp_message_with_and_without_arguments():
    assert vmctl.qmp_message("query-block") == {"execute": "query-block"}
    assert vmctl.qmp_message(("block_set_io_throttle", {"id": "x", "bps": 1})) == {
        "execute": "block_set_io_throttle", "arguments": {"id": "x", "bps": 1}}


def test_qmp_sends_arguments_on_the_wire(tmp_path, qemu):
    replies = vmctl.qmp(tmp_path, "query-block", ("block_set_io_throttle", vmctl.throttle_arguments(
        "/machine/peripheral-anon/device[5]", {"iops_rd": 200})))
    assert [m["execute"] for m in qemu.sent] == ["qmp_capabilities", "query-block", "block_set_io_throttle"]
    assert "arguments" not in qemu.sent[1]
    assert qemu.sent[2]["arguments"]["iops_rd"] == 200
    assert replies[-1] == {"return": {}}  # events skipped, one reply per command


def test_throttle_arguments_name_every_limit():
    args = vmctl.throttle_arguments("/machine/peripheral-anon/device[5]", {"bps_rd": 4000000, "iops_rd": 200})
    assert args == {"id": "/machine/peripheral-anon/device[5]", "bps": 0, "bps_rd": 4000000, "bps_wr": 0,
                    "iops": 0, "iops_rd": 200, "iops_wr": 0}
    assert vmctl.throttle_arguments("q", {}) == dict({"id": "q"}, **{k: 0 for k in LIMITS})
    with pytest.raises(ValueError, match="bps_read"):
        vmctl.throttle_arguments("q", {"bps_read": 1})
    with pytest.raises(ValueError):
        vmctl.throttle_arguments("q", {"iops": -1})


def test_drive_qdev_by_backend_name():
    blocks = [_block("gds-sw1-a", "/machine/peripheral-anon/device[3]"),
              _block("gds-sw1-b", "/machine/peripheral-anon/device[5]")]
    assert vmctl.drive_qdev(blocks, "gds-sw1-b") == "/machine/peripheral-anon/device[5]"
    with pytest.raises(SystemExit):
        vmctl.drive_qdev(blocks, "gds-sw9-z")


def test_throttle_parser():
    a = vmctl.build_parser().parse_args(["throttle", "--run-dir", "d", "gds-sw1-b", "--bps-rd", "4000000",
                                         "--iops-rd", "200"])
    assert (a.serial, a.bps_rd, a.iops_rd, a.bps, a.iops_wr, a.off) == ("gds-sw1-b", 4000000, 200, 0, 0, False)
    assert a.func is vmctl.cmd_throttle
    with pytest.raises(SystemExit):
        vmctl.build_parser().parse_args(["throttle", "--run-dir", "d", "gds-sw1-b", "--iops-rd", "-5"])
    with pytest.raises(SystemExit):
        vmctl.main(["throttle", "--run-dir", "d", "gds-sw1-b", "--off", "--iops-rd", "5"])


def test_throttle_on_and_off(tmp_path, qemu, capsys):
    vmctl.main(["throttle", "--run-dir", str(tmp_path), "gds-sw1-b", "--bps-rd", "4000000", "--iops-rd", "200"])
    out = json.loads(capsys.readouterr().out)
    assert out["qdev"] == "/machine/peripheral-anon/device[5]"
    # what QEMU has in effect, read back after the change
    assert out["limits"] == {"bps": 0, "bps_rd": 4000000, "bps_wr": 0, "iops": 0, "iops_rd": 200, "iops_wr": 0}
    sets = [m for m in qemu.sent if m["execute"] == "block_set_io_throttle"]
    assert sets[-1]["arguments"]["id"] == "/machine/peripheral-anon/device[5]"
    assert "device" not in sets[-1]["arguments"]  # deprecated in QEMU 7.2
    vmctl.main(["throttle", "--run-dir", str(tmp_path), "gds-sw1-b", "--off"])
    out = json.loads(capsys.readouterr().out)
    assert set(out["limits"].values()) == {0}
    assert "/machine/peripheral-anon/device[3]" not in qemu.limits  # the peer was never touched


def test_throttle_needs_a_limit_or_off(tmp_path, qemu):
    with pytest.raises(SystemExit):
        vmctl.main(["throttle", "--run-dir", str(tmp_path), "gds-sw1-b"])
    with pytest.raises(SystemExit):
        vmctl.main(["throttle", "--run-dir", str(tmp_path), "gds-nope", "--iops-rd", "5"])
    assert not [m for m in qemu.sent if m["execute"] == "block_set_io_throttle"]
