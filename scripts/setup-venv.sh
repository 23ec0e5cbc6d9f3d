#!/usr/bin/env bash
# setup-venv.sh CORE VENV: VENV/ with requirements.txt's pins, the ansible and ansible-core lines
# taken from requirements/core-CORE.txt, on a Python that core supports (scripts/find-python.sh).
# A VENV of another Python or another core is made anew (it is this script's own directory).
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -euo pipefail
core=${1:?usage: setup-venv.sh CORE VENV} venv=${2:?usage: setup-venv.sh CORE VENV}
here=$(cd "$(dirname "$0")/.." && pwd)
python=$("$here/scripts/find-python.sh" "$core")
wanted=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ -x "$venv/bin/python" ]; then
  have=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo none)
  core_have=$("$venv/bin/python" -c 'import ansible.release as r; print(".".join(r.__version__.split(".")[:2]))' 2>/dev/null || echo none)
  if [ "$have" != "$wanted" ] || { [ "$core_have" != none ] && [ "$core_have" != "$core" ]; }; then
    echo "setup-venv: $venv has Python $have and ansible-core $core_have; making it anew for ansible-core $core"
    [ -f "$venv/pyvenv.cfg" ] || { echo "setup-venv: $venv is not a virtual environment; not removing it" >&2; exit 2; }
    rm -rf "$venv"
  fi
fi
echo "setup-venv: ansible-core $core on $python (Python $wanted) in $venv/"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/pip" install -q --upgrade pip
"$venv/bin/pip" install -q -r <(grep -Ev '^ansible(-core)?==' "$here/requirements.txt") -r "$here/requirements/core-$core.txt"
