#!/bin/sh
# Lay out the DGX default on the test guest (molecule/vm/prepare.yml runs this over SSH), then
# print what was laid out as JSON. Idempotent: what exists already is left as it is.
#   /raid  md RAID0 "data" across the four switch drives (both switches), ext4, fstab by UUID
#   /keep  md RAID0 "keep" on the root-port drive gds-keep (behind no switch), ext4, fstab
# plus files with known checksums on /raid (meant to go), /keep and / (must stay).
set -eu
BYID=/dev/disk/by-id/nvme-QEMU_NVMe_Ctrl_
SWITCH_DRIVES="gds-sw1-a gds-sw1-b gds-sw2-a gds-sw2-b"
udevadm settle
for s in $SWITCH_DRIVES gds-keep gds-os; do
  [ -e "$BYID$s" ] || { echo "no NVMe drive with serial $s (expected $BYID$s)" >&2; exit 1; }
done

if [ ! -e /dev/md/data ]; then
  set --
  for s in $SWITCH_DRIVES; do set -- "$@" "$BYID$s"; done
  mdadm --create /dev/md/data --run --level=0 --chunk=512 --raid-devices=4 --name=data "$@" >&2
fi
if [ ! -e /dev/md/keep ]; then
  mdadm --create /dev/md/keep --run --level=0 --raid-devices=1 --force --name=keep "${BYID}gds-keep" >&2
fi
udevadm settle
# DGX OS records its arrays in mdadm.conf
mdadm --detail --scan | while read -r line; do
  grep -qxF "$line" /etc/mdadm/mdadm.conf || echo "$line" >> /etc/mdadm/mdadm.conf
done
for a in data keep; do
  [ -n "$(blkid -o value -s TYPE /dev/md/$a || true)" ] || mkfs.ext4 -q -L "$a" /dev/md/$a
done
fs_uuid() { blkid -o value -s UUID "/dev/md/$1"; }
mnt() {  # mount point, array
  mkdir -p "$1"
  grep -q "[[:space:]]$1[[:space:]]" /etc/fstab || \
    printf 'UUID=%s %s ext4 defaults,nofail 0 2\n' "$(fs_uuid "$2")" "$1" >> /etc/fstab
  mountpoint -q "$1" || mount "$1"
}
mnt /raid data
mnt /keep keep
systemctl daemon-reload

mkdir -p /var/lib/gds-vm
[ -e /raid/before-regroup.bin ] || head -c 8M /dev/urandom > /raid/before-regroup.bin
[ -e /keep/precious.bin ] || head -c 32M /dev/urandom > /keep/precious.bin
[ -e /var/lib/gds-vm/os-marker.bin ] || head -c 1M /dev/urandom > /var/lib/gds-vm/os-marker.bin
sync

sum() { sha256sum "$1" | cut -d' ' -f1; }
md_uuid() { mdadm --detail --export "/dev/md/$1" | sed -n 's/^MD_UUID=//p'; }
disk() { basename "$(readlink -e "$BYID$1")"; }
# Ansible's script runs on a terminal, so stderr ends up in stdout too: mark where the JSON starts.
echo "--- layout ---"
printf '{\n "drives": {'
sep=""
for s in $SWITCH_DRIVES gds-keep gds-os; do printf '%s"%s": "%s"' "$sep" "$s" "$(disk "$s")"; sep=", "; done
printf '},\n "acs_at_boot": {'
sep=""
for bdf in $(lspci -D -n -d 1b36:000c | cut -d' ' -f1); do   # QEMU's pcie-root-port
  printf '%s"%s": "%s"' "$sep" "$bdf" "$(setpci -s "$bdf" ECAP_ACS+6.w)"; sep=", "
done
printf '},\n'
printf ' "default_array": {"device": "/dev/md/data", "mount": "/raid", "md_uuid": "%s", "fs_uuid": "%s",\n' "$(md_uuid data)" "$(fs_uuid data)"
printf '   "members": ["gds-sw1-a", "gds-sw1-b", "gds-sw2-a", "gds-sw2-b"], "file": "/raid/before-regroup.bin", "sha256": "%s"},\n' "$(sum /raid/before-regroup.bin)"
printf ' "keep_array": {"device": "/dev/md/keep", "mount": "/keep", "md_uuid": "%s", "fs_uuid": "%s",\n' "$(md_uuid keep)" "$(fs_uuid keep)"
printf '   "members": ["gds-keep"], "file": "/keep/precious.bin", "sha256": "%s"},\n' "$(sum /keep/precious.bin)"
printf ' "os": {"serial": "gds-os", "device": "%s", "fs_uuid": "%s", "file": "/var/lib/gds-vm/os-marker.bin", "sha256": "%s"}\n}\n' \
  "$(findmnt -n -o SOURCE --mountpoint /)" "$(findmnt -n -o UUID --mountpoint /)" "$(sum /var/lib/gds-vm/os-marker.bin)"
