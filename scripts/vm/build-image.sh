#!/usr/bin/env bash
# Build (or reuse from the cache) the Debian bookworm guest image of the molecule `vm` scenario.
#
#   scripts/vm/build-image.sh            prints the cache directory that holds the image
#   scripts/vm/build-image.sh --key      prints the recipe key only (no build)
#
# The cache entry is $GDS_VM_CACHE/bookworm-<key>/ with
#   rootfs.raw   ext4 file system image of the guest (no partition table, label gds-root)
#   vmlinuz      the guest kernel      initrd.img   its initramfs
# The kernel is Debian's from $KERNEL_SUITE (CONFIG_PCI_P2PDMA: bookworm's 6.1 and trixie's 6.12 are
# built without it): its packages are unpacked into the bookworm root, depmod and mkinitramfs run there.
#   recipe.txt   what went into it     ready        written last: the entry is complete
# <key> is a hash of this script, packages.txt and every file under guest/, so any change to the
# recipe builds a new entry. Builds run in a temporary directory inside the cache and are moved
# into place with one rename; a lock serialises concurrent builds. Debian packages are kept in
# $GDS_VM_CACHE/debs between builds. Entries not used for $GDS_VM_CACHE_KEEP_DAYS days are pruned.
#
# Environment: GDS_VM_CACHE (default /var/cache/gds-commission/vm), GDS_VM_MIRROR (default: the
# bookworm mirror of this machine's apt sources, else debootstrap's default), GDS_VM_ROOT_SIZE
# (default 3G), GDS_VM_CACHE_KEEP_DAYS (default 14). Needs root, debootstrap and e2fsprogs.
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SUITE=bookworm
# The guest kernel's suite: the first Debian kernel with CONFIG_PCI_P2PDMA=y (peer-to-peer DMA
# into NVMe controller memory, p2pmem in sysfs), so the guest can show P2PDMA on a real kernel.
KERNEL_SUITE=trixie-backports
CACHE="${GDS_VM_CACHE:-/var/cache/gds-commission/vm}"
ROOT_SIZE="${GDS_VM_ROOT_SIZE:-3G}"
KEEP_DAYS="${GDS_VM_CACHE_KEEP_DAYS:-14}"

log() { printf 'build-image: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

packages() { sed -e 's/#.*//' -e 's/[[:space:]]//g' "$HERE/packages.txt" | grep -v '^$'; }

recipe_key() {
  (
    cd "$HERE"
    printf 'suite %s kernel %s size %s\n' "$SUITE" "$KERNEL_SUITE" "$ROOT_SIZE"
    sha256sum build-image.sh packages.txt
    find guest -type f -print0 | sort -z | xargs -0 sha256sum
    find guest -type f -perm -u+x | sort   # git keeps only the executable bit
  ) | sha256sum | cut -c1-16
}

mirror() {
  if [ -n "${GDS_VM_MIRROR:-}" ]; then echo "$GDS_VM_MIRROR"; return; fi
  # deb822 sources first, then the one-line format; the first bookworm 'main' archive wins.
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk -v suite="$SUITE" '
      /^[[:space:]]*$/ { if (uri != "" && ok) { print uri; exit } uri=""; ok=0; next }
      /^URIs:/   { uri=$2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) ok=1 }
      END        { if (uri != "" && ok) print uri }' "$f" | head -n1
  done | head -n1 | grep . && return
  if [ -r /etc/apt/sources.list ]; then
    awk -v suite="$SUITE" '$1 == "deb" && $0 !~ /\[/ && $3 == suite { print $2; exit }' /etc/apt/sources.list | grep . && return
  fi
  return 0   # empty: debootstrap's own default mirror
}

# Debian's newest kernel in $KERNEL_SUITE, unpacked into the root with its modules and config
# (apt with lists of its own: nothing of this machine's apt changes). Its linux-image package
# needs a newer linux-base than bookworm's, so dpkg is not asked: the files are what the guest
# needs to boot it, and the kernel's own /usr/lib/modules/<version>/config is kept in /boot.
install_kernel() {
  local root="$1" apt_dir="$CACHE/apt-$KERNEL_SUITE" base version deb
  base="${MIRROR:-http://deb.debian.org/debian}"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial"
  echo "deb $base $KERNEL_SUITE main" > "$apt_dir/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/dev/null
              -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir" -o APT::Sandbox::User=root)
  apt-get "${opts[@]}" -qq update || die "apt-get update of $KERNEL_SUITE ($base) failed"
  version="$(apt-cache "${opts[@]}" depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { sub("linux-image-", "", $2); print $2; exit }')"
  [ -n "$version" ] || die "no linux-image-amd64 in $KERNEL_SUITE"
  (cd "$CACHE/debs" && apt-get "${opts[@]}" -qq download "linux-binary-$version" "linux-modules-$version" "linux-base-$version") \
    || die "downloading kernel $version from $KERNEL_SUITE failed"
  for deb in "$CACHE"/debs/linux-{binary,modules,base}-"$version"_*.deb; do
    dpkg-deb -x "$deb" "$root" || die "unpacking $deb failed"
  done
  install -m 0644 "$root/usr/lib/modules/$version/vmlinuz" "$root/boot/vmlinuz-$version"
  install -m 0644 "$root/usr/lib/modules/$version/config" "$root/boot/config-$version"
  grep -qx 'CONFIG_PCI_P2PDMA=y' "$root/boot/config-$version" || die "kernel $version has no CONFIG_PCI_P2PDMA"
  in_root depmod "$version" || die "depmod $version failed"
  in_root mkinitramfs -o "/boot/initrd.img-$version" "$version" \
    || die "mkinitramfs $version failed"
  log "kernel $version from $KERNEL_SUITE installed"
}

KEY="$(recipe_key)"
if [ "${1:-}" = "--key" ]; then echo "$KEY"; exit 0; fi

DEST="$CACHE/$SUITE-$KEY"
if [ -f "$DEST/ready" ]; then
  touch "$DEST/last-used"
  echo "$DEST"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "building the guest image needs root (debootstrap); run as root or fill $CACHE"
for t in debootstrap mke2fs chroot flock; do command -v "$t" >/dev/null || die "$t not found (apt-get install debootstrap e2fsprogs util-linux)"; done

mkdir -p "$CACHE" "$CACHE/debs"
exec 9>"$CACHE/.lock"
log "waiting for the cache lock $CACHE/.lock"
flock -w 1800 9 || die "timed out waiting for $CACHE/.lock"
if [ -f "$DEST/ready" ]; then touch "$DEST/last-used"; echo "$DEST"; exit 0; fi

TMP="$(mktemp -d "$CACHE/.build-$KEY.XXXXXX")"
ROOT="$TMP/rootfs"
cleanup() {
  local m
  for m in dev/pts dev proc sys; do mountpoint -q "$ROOT/$m" 2>/dev/null && umount -l "$ROOT/$m"; done
  rm -rf "$TMP"
}
trap cleanup EXIT

start=$(date +%s)
MIRROR="$(mirror)"
PKGS="$(packages | paste -sd, -)"
log "debootstrap $SUITE (minbase + $PKGS) from ${MIRROR:-debootstrap default} into $ROOT"
# The guest kernel postinst builds the initramfs with MODULES=most, so nvme/md are in it.
debootstrap --variant=minbase --include="$PKGS" --cache-dir="$CACHE/debs" \
  "$SUITE" "$ROOT" ${MIRROR:+"$MIRROR"} > "$TMP/debootstrap.log" 2>&1 \
  || { tail -n 40 "$TMP/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
log "debootstrap done in $(( $(date +%s) - start )) s"

in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }
# Before our files: initramfs-tools' default MODULES=most (gds-vm.conf's dep is for the guest).
install_kernel "$ROOT"

# Our files: network, SSH, the key-from-fw_cfg unit, fstab, grub defaults.
(cd "$HERE/guest" && find . -type f) | while read -r f; do
  mode=0644; [ -x "$HERE/guest/$f" ] && mode=0755
  install -D -o root -g root -m "$mode" "$HERE/guest/$f" "$ROOT/$f"
done

in_root systemctl enable systemd-networkd.service gds-authorized-keys.service ssh.service >/dev/null 2>&1
# Nothing in the background that would compete with the test for two emulated CPUs, and no
# wait-online delay at boot.
in_root systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
  e2scrub_all.timer e2scrub_reap.service fstrim.timer mdcheck_start.timer mdcheck_continue.timer \
  mdmonitor-oneshot.timer man-db.timer >/dev/null 2>&1 || true
in_root passwd -l root >/dev/null
# update-grub writes /boot/grub/grub.cfg (grub-pc, which would create the folder, is not installed:
# nothing boots from the MBR, QEMU boots what grub.cfg names; see vmctl.py reboot).
mkdir -p "$ROOT/boot/grub"
rm -f "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/*_Packages 2>/dev/null || true
# One machine id per boot of a fresh overlay (systemd creates it when the file is empty).
: > "$ROOT/etc/machine-id"
rm -f "$ROOT/var/lib/dbus/machine-id"

vmlinuz="$(ls "$ROOT"/boot/vmlinuz-* | sort -V | tail -n1)"
initrd="$(ls "$ROOT"/boot/initrd.img-* | sort -V | tail -n1)"
[ -f "$vmlinuz" ] && [ -f "$initrd" ] || die "no kernel/initrd under $ROOT/boot"
mkdir -p "$TMP/out"
cp "$vmlinuz" "$TMP/out/vmlinuz"
cp "$initrd" "$TMP/out/initrd.img"
{
  echo "suite: $SUITE"
  echo "key: $KEY"
  echo "kernel: $(basename "$vmlinuz")"
  echo "built: $(date -u +%FT%TZ) in $(( $(date +%s) - start )) s"
  echo "packages: $PKGS"
  echo "mirror: ${MIRROR:-debootstrap default}"
} > "$TMP/out/recipe.txt"
in_root dpkg-query -W -f='${Package} ${Version}\n' > "$TMP/out/packages.lst"

log "mke2fs -d into a $ROOT_SIZE ext4 image"
mke2fs -q -F -t ext4 -L gds-root -d "$ROOT" "$TMP/out/rootfs.raw" "$ROOT_SIZE" \
  || die "mke2fs -d failed"
touch "$TMP/out/ready" "$TMP/out/last-used"
rm -rf "$DEST"   # an entry without `ready` is a leftover
mv -T "$TMP/out" "$DEST"
log "image ready in $DEST after $(( $(date +%s) - start )) s"

# Prune other recipes nobody used for a while (their overlays would be gone long ago).
find "$CACHE" -mindepth 2 -maxdepth 2 -name last-used -mtime +"$KEEP_DAYS" -printf '%h\n' 2>/dev/null \
  | while read -r old; do [ "$old" = "$DEST" ] || { log "pruning $old"; rm -rf "$old"; }; done
echo "$DEST"
