#!/usr/bin/env bash
# The Python wheels (and the Ansible collections tarball) that the lab scripts carry to a GPU
# machine without a package index, as listed in scripts/carried-wheels.txt (CPython 3.12,
# manylinux x86_64).
#
#   scripts/carry-wheels.sh [download [GROUP...]]  fetch every wheel of the groups (default: all)
#                                                  into .whl/, and build .whl/collections.tgz
#   scripts/carry-wheels.sh check GROUP...         name each wheel of the groups missing from
#                                                  .whl/ (exit 1 when one is)
#   scripts/carry-wheels.sh install GROUP TARGET   check, then install the group into TARGET
#                                                  (pip --target; collections: unpacked there)
#   scripts/carry-wheels.sh collections [WHEEL]    only .whl/collections.tgz, from the ansible
#                                                  wheel (downloaded unless given)
#
# Groups: ansible (ansible-playbook and its imports), kvikio (KvikIO's benchmark), collections.
# `make wheels` runs the download. Environment: WHEEL_DIR (default .whl), PYTHON (python3; its
# pip does the work), CACHE_DIR (.cache/wheels: the ansible wheel, which stays behind).
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MANIFEST=$ROOT/scripts/carried-wheels.txt
WHEEL_DIR=${WHEEL_DIR:-$ROOT/.whl}
CACHE_DIR=${CACHE_DIR:-$ROOT/.cache/wheels}
PYTHON=${PYTHON:-python3}
TARBALL=collections.tgz
# pip matches a manylinux tag exactly: every one a wheel for glibc <= 2.35 may carry
PLATFORMS=(manylinux1_x86_64 manylinux2010_x86_64 manylinux2014_x86_64 manylinux_2_17_x86_64
	manylinux_2_24_x86_64 manylinux_2_26_x86_64 manylinux_2_27_x86_64 manylinux_2_28_x86_64
	manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64)

die() { echo "carry-wheels: $*" >&2; exit 1; }

# manifest_items KIND: the second column of every line of that kind
manifest_items() {
	[ -r "$MANIFEST" ] || die "$MANIFEST is missing"
	awk -v k="$1" '$1 == k {print $2}' "$MANIFEST"
}

# dist names compare normalised, as wheel file names spell them (PyYAML ~ pyyaml, nvidia-ml-py ~ nvidia_ml_py)
norm() { printf '%s' "$1" | tr 'A-Z.-' 'a-z__'; }

# wheel_for NAME VERSION: the wheel of that distribution and version in WHEEL_DIR, if any
wheel_for() {
	local want f base
	want=$(norm "$1")
	for f in "$WHEEL_DIR"/*.whl; do
		[ -e "$f" ] || continue
		base=${f##*/}
		if [ "$(norm "${base%%-*}")" = "$want" ]; then
			base=${base#*-}
			[ "${base%%-*}" = "$2" ] && { echo "$f"; return 0; }
		fi
	done
	return 1
}

# other_versions NAME VERSION: wheels of that distribution in WHEEL_DIR with another version
other_versions() {
	local want f base
	want=$(norm "$1")
	for f in "$WHEEL_DIR"/*.whl; do
		[ -e "$f" ] || continue
		base=${f##*/}
		[ "$(norm "${base%%-*}")" = "$want" ] || continue
		base=${base#*-}
		[ "${base%%-*}" = "$2" ] || echo "$f"
	done
}

check_group() {
	local group=$1 req name version missing=0 others
	if [ "$group" = collections ]; then
		if [ ! -s "$WHEEL_DIR/$TARBALL" ]; then
			echo "missing: $WHEEL_DIR/$TARBALL (collections $(manifest_items collection | tr '\n' ' ')from $(manifest_items collections)); make it with: make wheels"
			return 1
		fi
		return 0
	fi
	[ -n "$(manifest_items "$group")" ] || die "no group '$group' in $MANIFEST"
	while read -r req; do
		name=${req%%==*}
		version=${req#*==}
		if ! wheel_for "$name" "$version" >/dev/null; then
			others=$(other_versions "$name" "$version" | sed 's|.*/||' | tr '\n' ' ')
			echo "missing wheel: $name==$version (group $group) in $WHEEL_DIR${others:+; found only ${others% }}"
			missing=1
		fi
	done < <(manifest_items "$group")
	[ $missing = 0 ] || echo "make the carried wheels with: make wheels (scripts/carry-wheels.sh download $group)"
	return $missing
}

cmd_check() {
	local rc=0 g
	[ $# -gt 0 ] || die "check: name a group (ansible, kvikio, collections)"
	for g in "$@"; do
		check_group "$g" || rc=1
	done
	return $rc
}

cmd_install() {
	local group=${1:-} target=${2:-} req files=()
	if [ -z "$group" ] || [ -z "$target" ]; then die "install: GROUP TARGET"; fi
	check_group "$group" || return 1
	mkdir -p "$target" || return 1
	if [ "$group" = collections ]; then
		tar -xzf "$WHEEL_DIR/$TARBALL" -C "$target"
		return
	fi
	while read -r req; do
		files+=("$(wheel_for "${req%%==*}" "${req#*==}")")
	done < <(manifest_items "$group")
	"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$target" "${files[@]}"
}

pip_download() {	# pip_download DEST REQUIREMENT
	local plat=() p
	for p in "${PLATFORMS[@]}"; do plat+=(--platform "$p"); done
	"$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		"${plat[@]}" -d "$1" "$2"
}

# collections_tarball WHEEL: WHEEL_DIR/collections.tgz with the manifest's collections, as
# ansible_collections/<namespace>/<name>/ (ANSIBLE_COLLECTIONS_PATH points at its parent)
collections_tarball() {
	local colls
	mapfile -t colls < <(manifest_items collection)
	mkdir -p "$WHEEL_DIR" || return 1
	"$PYTHON" - "$1" "$WHEEL_DIR/$TARBALL" "${colls[@]}" <<'EOF'
import io, os, sys, tarfile, time, zipfile
whl, out, colls = sys.argv[1], sys.argv[2], sys.argv[3:]
tmp = out + ".tmp"
try:
    with zipfile.ZipFile(whl) as z, tarfile.open(tmp, "w:gz") as tar:
        infos = z.infolist()
        for coll in colls:
            prefix = "ansible_collections/%s/" % coll.replace(".", "/")
            members = [i for i in infos if i.filename.startswith(prefix) and not i.is_dir()]
            if not members:
                sys.exit("carry-wheels: %s has no collection %s (%s)" % (whl, coll, prefix))
            for info in members:
                data = z.read(info)
                ti = tarfile.TarInfo(info.filename)
                ti.size = len(data)
                ti.mode = (info.external_attr >> 16) & 0o777 or 0o644
                ti.mtime = time.mktime(info.date_time + (0, 0, -1))
                tar.addfile(ti, io.BytesIO(data))
            print("collection %s: %d files" % (coll, len(members)))
    os.replace(tmp, out)
except (OSError, zipfile.BadZipFile) as exc:
    if os.path.exists(tmp):
        os.unlink(tmp)
    sys.exit("carry-wheels: %s: %s" % (whl, exc))
print("wrote", out)
EOF
}

cmd_collections() {
	local whl=${1:-} req
	if [ -z "$whl" ]; then
		req=$(manifest_items collections | head -1)
		[ -n "$req" ] || die "no 'collections' line in $MANIFEST"
		mkdir -p "$CACHE_DIR" || return 1
		whl=$(wheel_dir_lookup "$CACHE_DIR" "$req") || {
			echo "downloading $req (the collections' source, kept in $CACHE_DIR)"
			pip_download "$CACHE_DIR" "$req" || { echo "FAILED: pip download $req"; return 1; }
			whl=$(wheel_dir_lookup "$CACHE_DIR" "$req") || { echo "FAILED: no wheel of $req in $CACHE_DIR"; return 1; }
		}
	fi
	collections_tarball "$whl"
}

wheel_dir_lookup() {	# wheel_dir_lookup DIR NAME==VERSION
	WHEEL_DIR=$1 wheel_for "${2%%==*}" "${2#*==}"
}

cmd_download() {
	local groups=("$@") g req failed=() f
	[ ${#groups[@]} -gt 0 ] || groups=(ansible kvikio collections)
	mkdir -p "$WHEEL_DIR" || return 1
	for g in "${groups[@]}"; do
		if [ "$g" = collections ]; then
			cmd_collections || failed+=("collections")
			continue
		fi
		[ -n "$(manifest_items "$g")" ] || die "no group '$g' in $MANIFEST"
		while read -r req; do
			if wheel_for "${req%%==*}" "${req#*==}" >/dev/null; then
				echo "have $req"
				continue
			fi
			echo "downloading $req"
			pip_download "$WHEEL_DIR" "$req" || { failed+=("$req"); continue; }
			# one version of each: two of them stop the whole install
			while read -r f; do
				[ -n "$f" ] || continue
				echo "removing $f (another version than $req)"
				rm -f "$f"
			done < <(other_versions "${req%%==*}" "${req#*==}")
		done < <(manifest_items "$g")
	done
	if [ ${#failed[@]} -gt 0 ]; then
		echo "carry-wheels: FAILED: ${failed[*]}"
		return 1
	fi
	cmd_check "${groups[@]}" && echo "carry-wheels: $WHEEL_DIR holds every wheel of: ${groups[*]}"
}

case "${1:-download}" in
download) shift $(( $# > 0 )); cmd_download "$@" ;;
check) shift; cmd_check "$@" ;;
install) shift; cmd_install "$@" ;;
collections) shift; cmd_collections "$@" ;;
-h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' ;;
*) die "unknown command '$1' (download, check, install, collections)" ;;
esac
