#!/usr/bin/env bash
# Render a report.html in headless Chromium (Debian's package) and save a PNG screenshot.
#   scripts/screenshot-report.sh [reports/latest/report.html] [out.png] [width] [height]
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -euo pipefail
html=$(realpath "${1:-reports/latest/report.html}")
out=$(realpath -m "${2:-${html%.html}.png}")
width=${3:-1280}
height=${4:-2400}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "screenshot-report: no chromium found (apt-get install chromium)" >&2; exit 3; }
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
# No network at all: the report must render from the file alone.
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$profile" --hide-scrollbars --window-size="${width},${height}" \
  --screenshot="$out" "file://$html" >/dev/null 2>&1
[ -s "$out" ] && echo "$out"
