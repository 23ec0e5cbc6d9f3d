#!/usr/bin/env bash
# find-python.sh CORE: print the path of a Python that ansible-core CORE supports on the controller,
# with venv and pip (ensurepip), or exit 2 saying what to install. The supported range is the
# "# python X.Y-X.Z" line of requirements/core-CORE.txt. Looked for, oldest supported version first:
# pythonX.Y on PATH, /usr/bin, /usr/local/bin, then pyenv's versions (~/.pyenv or $PYENV_ROOT).
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -euo pipefail
core=${1:?usage: find-python.sh CORE (for example 2.21)}
here=$(cd "$(dirname "$0")/.." && pwd)
pins=$here/requirements/core-$core.txt
die() { echo "find-python: $*" >&2; exit 2; }
[ -r "$pins" ] || die "no ansible-core $core here: requirements/ has $(cd "$here/requirements" && ls core-*.txt | sed 's/core-//; s/\.txt//' | tr '\n' ' ')"
range=$(sed -n 's/^# python \([0-9][0-9.]*-[0-9][0-9.]*\)$/\1/p' "$pins")
[ -n "$range" ] || die "$pins has no '# python X.Y-X.Z' line"
low=${range%-*} high=${range#*-}
minor() { echo "${1#*.}"; }

usable() {  # a Python of the wanted minor version with a working venv and ensurepip
  [ -x "$1" ] && "$1" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != tuple(map(int, sys.argv[1].split("."))))' "$2" 2>/dev/null
}

for ((m = $(minor "$low"); m <= $(minor "$high"); m++)); do
  version=3.$m
  pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
  # pyenv's newest patch release of that version first among its own
  for candidate in "$(command -v "python$version" || true)" "/usr/bin/python$version" "/usr/local/bin/python$version" \
      $(ls -d "$pyenv_root/versions/$version".* 2>/dev/null | sort -t. -k3,3nr | sed "s|\$|/bin/python$version|"); do
    [ -n "$candidate" ] || continue
    # (the interpreter itself, not a pyenv shim: the venv must not depend on pyenv's settings)
    if usable "$candidate" "$version"; then "$candidate" -c 'import sys; print(sys.executable)'; exit 0; fi
  done
done
die "ansible-core $core needs Python $low to $high on the controller with venv, and none was found
  (looked for python$low .. python$high on PATH, in /usr/bin, /usr/local/bin and pyenv's versions).
  Install one (Debian/Ubuntu: apt-get install python3.12 python3.12-venv where it is packaged;
  or pyenv install 3.12), or pick another core: make setup CORE=2.19 runs on Python 3.11 to 3.13."
