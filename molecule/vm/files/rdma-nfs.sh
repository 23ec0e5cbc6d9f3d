#!/bin/bash
# A real RDMA stack and an NFS server on the test guest (molecule/vm/prepare.yml runs this over
# SSH), then print what was set up as JSON after a '--- rdma-nfs ---' line. Idempotent.
#   rdma-nfs.sh MAC ADDR0 ADDR1 [RDMA_DEV]
# MAC names the second NIC (behind PCIe switch 1); ADDR0/ADDR1 are its two addresses, standing in
# for two server interfaces of the guide's naming /mnt/nfs/<client-if>/data/<server-n>.
#   - soft-RoCE RDMA_DEV (rxe0) on that NIC, re-created at every boot by gds-rxe.service
#   - nfsd exporting /srv/gds-nfs to the NIC's subnet, listening for RDMA on port 20049
#   - /mnt/nfs/<if>/data/0: ADDR0 over RDMA (vers=3,proto=rdma,port=20049,rsize=wsize=1 MiB)
#     /mnt/nfs/<if>/data/1: ADDR1 over TCP (the same export), both in fstab
# If the RDMA mount fails, the kernel's messages about it are recorded and only TCP stays.
set -euo pipefail
MAC=$1 ADDR0=$2 ADDR1=$3 RDEV=${4:-rxe0}
EXPORT=/srv/gds-nfs
OPTS_RDMA="vers=3,proto=rdma,port=20049,rsize=1048576,wsize=1048576"
OPTS_TCP="vers=3,proto=tcp,rsize=1048576,wsize=1048576"
log() { echo "rdma-nfs: $*" >&2; }

IF=
for d in /sys/class/net/*; do
  [ "$(cat "$d/address")" = "$MAC" ] && IF=$(basename "$d")
done
[ -n "$IF" ] || { log "no network interface with MAC $MAC"; exit 1; }
# the PCI function: /sys/class/net/<if>/device of a virtio NIC is its virtio device, one below
PCI=$(readlink -f "/sys/class/net/$IF/device" | tr / '\n' | grep -E '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$' | tail -n1)

has_addr() { ip -4 -o addr show dev "$IF" | grep -q "inet $1/"; }
for _ in $(seq 60); do has_addr "$ADDR0" && has_addr "$ADDR1" && break; sleep 1; done
has_addr "$ADDR0" && has_addr "$ADDR1" || { log "$IF has not got $ADDR0 and $ADDR1 (systemd-networkd)"; exit 1; }

# Modules at every boot: soft-RoCE, and rpcrdma (the NFS client's and server's RDMA transport).
printf 'rdma_rxe\nrpcrdma\n' > /etc/modules-load.d/gds-rdma.conf

# rxe0 at every boot, once the NIC has its addresses (the mounts below wait for this unit).
cat > /etc/systemd/system/gds-rxe.service <<EOF
[Unit]
Description=Soft-RoCE $RDEV on $IF (gds-commission test guest)
BindsTo=sys-subsystem-net-devices-$IF.device
After=sys-subsystem-net-devices-$IF.device systemd-networkd.service systemd-modules-load.service
Before=remote-fs-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStartPre=/sbin/modprobe rdma_rxe
ExecStart=/bin/sh -c 'rdma link show $RDEV/1 >/dev/null 2>&1 || rdma link add $RDEV type rxe netdev $IF'
ExecStart=/bin/sh -c 'for i in \$\$(seq 60); do ip -4 -o addr show dev $IF | grep -q "inet $ADDR0/" && exit 0; sleep 1; done; exit 1'

[Install]
WantedBy=multi-user.target
EOF
# enabled by hand: `systemctl enable` reloads systemd, which takes half a minute under emulation
mkdir -p /etc/systemd/system/multi-user.target.wants
ln -sf /etc/systemd/system/gds-rxe.service /etc/systemd/system/multi-user.target.wants/gds-rxe.service

# The NFS server: an export for the NIC's subnet. `insecure`: an NFS/RDMA client does not use a
# reserved port (Documentation/filesystems/nfs/nfs-rdma.rst).
mkdir -p "$EXPORT" /etc/exports.d /etc/nfs.conf.d
subnet=$(ip -4 -o route show dev "$IF" scope link proto kernel | awk '{print $1; exit}')
echo "$EXPORT $subnet(rw,sync,no_subtree_check,no_root_squash,insecure)" > /etc/exports.d/gds-nfs.exports
# RDMA listener at every start of nfsd (rpc.nfsd reads nfs.conf.d)
printf '[nfsd]\nrdma=y\nrdma-port=20049\n' > /etc/nfs.conf.d/gds-rdma.conf
# nfsd's largest rsize/wsize defaults to a share of RAM (256 KiB in this 2 GiB guest); the
# guide's mounts ask for 1 MiB, as a server of a GPU cluster grants. Settable only while nfsd
# has no threads, so before each start ("-": a start with threads running keeps what it has).
mkdir -p /etc/systemd/system/nfs-server.service.d
printf '[Service]\nExecStartPre=-/bin/sh -c "echo 1048576 > /proc/fs/nfsd/max_block_size"\n' \
  > /etc/systemd/system/nfs-server.service.d/gds-max-block-size.conf

unit_of() { systemd-escape -p --suffix=mount "$1"; }
fstab_line() {  # mount point, source, options
  grep -q "[[:space:]]$1[[:space:]]" /etc/fstab && return 0
  printf '%s %s nfs %s,_netdev,nofail,x-systemd.requires=gds-rxe.service,x-systemd.requires=nfs-server.service,x-systemd.mount-timeout=90 0 0\n' \
    "$2" "$1" "$3" >> /etc/fstab
}
MNT_RDMA=/mnt/nfs/$IF/data/0
MNT_TCP=/mnt/nfs/$IF/data/1
mkdir -p "$MNT_RDMA" "$MNT_TCP"
fstab_line "$MNT_TCP" "$ADDR1:$EXPORT" "$OPTS_TCP"
fstab_line "$MNT_RDMA" "$ADDR0:$EXPORT" "$OPTS_RDMA"

# Everything written: one reload (each costs half a minute under emulation), then start it all.
# nfs-server.service is enabled by its package.
systemctl daemon-reload
modprobe rdma_rxe
modprobe rpcrdma
systemctl start gds-rxe.service
systemctl restart nfs-server.service
exportfs -ra
grep -q '^rdma 20049$' /proc/fs/nfsd/portlist || echo 'rdma 20049' > /proc/fs/nfsd/portlist
systemctl start "$(unit_of "$MNT_TCP")"

rdma_error=""
dmesg_lines="[]"
if ! mountpoint -q "$MNT_RDMA"; then
  seen=$(dmesg | wc -l)
  if ! out=$(systemctl start "$(unit_of "$MNT_RDMA")" 2>&1); then
    rdma_error="systemctl start $(unit_of "$MNT_RDMA") failed: $out; $(journalctl -q -n 5 -u "$(unit_of "$MNT_RDMA")" --no-pager 2>&1 | tr '\n' ' ')"
    dmesg_lines=$(dmesg | tail -n +"$((seen + 1))" | { grep -iE 'rpcrdma|svcrdma|rxe|nfs|rdma|sunrpc' || true; } \
      | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().splitlines()))')
    log "NFS over RDMA failed, keeping TCP only: $rdma_error"
    # keep the node bootable without waiting for a mount that cannot work
    sed -i "\\|[[:space:]]$MNT_RDMA[[:space:]]|d" /etc/fstab
    systemctl daemon-reload
  fi
fi

echo '--- rdma-nfs ---'
IF="$IF" PCI="$PCI" RDEV="$RDEV" EXPORT="$EXPORT" MNT_RDMA="$MNT_RDMA" MNT_TCP="$MNT_TCP" \
ADDR0="$ADDR0" ADDR1="$ADDR1" RDMA_ERROR="$rdma_error" DMESG="$dmesg_lines" python3 - <<'EOF'
import json, os
e = os.environ
port = "/sys/class/infiniband/%s/ports/1" % e["RDEV"]
def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None
mounts = {}
with open("/proc/mounts") as f:
    for line in f:
        src, target, fstype, opts = line.split()[:4]
        if target in (e["MNT_RDMA"], e["MNT_TCP"]):
            mounts[target] = {"source": src, "fstype": fstype, "options": opts}
print(json.dumps({
    "netdev": e["IF"], "pci": e["PCI"], "rdma_dev": e["RDEV"], "addresses": [e["ADDR0"], e["ADDR1"]],
    "port_state": read(port + "/state"), "max_block_size": read("/proc/fs/nfsd/max_block_size"), "rate": read(port + "/rate"),
    "link_layer": read(port + "/link_layer"),
    "export": e["EXPORT"], "portlist": (read("/proc/fs/nfsd/portlist") or "").splitlines(),
    "mount_rdma": e["MNT_RDMA"], "mount_tcp": e["MNT_TCP"], "mounts": mounts,
    "rdma_error": e["RDMA_ERROR"] or None, "rdma_dmesg": json.loads(e["DMESG"]),
}, indent=1))
EOF
