#!/usr/bin/env bash
# The gdsio options and job files of gdsbench on a GPU node (CUDA + libcufile; compat mode is
# enough): every memory type, no buffer registration, I/O size ranges, random fill and refill,
# unaligned random offsets, buffered I/O, the worker-process default, and a job file with two jobs
# at once (a cuFile job and a CPU job), each written then read back with -V where gdsio allows it.
#
#   bench/gpu_options.sh [DATA_DIR]
#
# Exit status: 0 when every run passed; 1 otherwise, each failed run named. Environment as
# bench/gpu_validate.sh (OUT, GDSV_GPU, CUDA_HOME).
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac  # the header above is the usage
set -u -o pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$HERE/obj/gpu_options}
T=${GDSV_T:-2}
GPU=${GDSV_GPU:-0}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# shellcheck source-path=SCRIPTDIR source=gpu_lib.sh
. "$HERE/gpu_lib.sh"
gdsv_init
gdsv_setup "${1:-}"

D=$(mktemp -d "$DATA/options.XXXXXX") || exit 1
rm -f "$D"/gdsbench.*

say "the worker-process default and -P 1, written then verified"
gds "seq-write-default" -D "$D" -d "$GPU" -w 4 -s 64M -i 1M -x 0 -I 1 -V
gds "seq-read-default" -D "$D" -d "$GPU" -w 4 -i 1M -x 0 -I 0 -V
gds "seq-read-threads" -D "$D" -d "$GPU" -w 4 -i 1M -x 0 -I 0 -V -P 1

say "memory types (-m 2 pinned host, 3 malloc, 4 mmap), no registration (-b), buffered I/O (-O 1)"
for m in 2 3 4; do
	gds "read-m$m" -D "$D" -d "$GPU" -w 4 -i 1M -x 0 -I 0 -V -m "$m"
done
gds "read-unregistered" -D "$D" -d "$GPU" -w 4 -i 1M -x 0 -I 0 -V -b
gds "read-x6-unregistered" -D "$D" -d "$GPU" -w 4 -i 1M -x 6 -I 0 -V -b
# buffered (-O 1) while the files still hold the verify pattern (-R below overwrites it)
gds "read-buffered" -D "$D" -d "$GPU" -w 4 -i 1M -x 0 -I 0 -O 1 -V

say "size ranges (-i MIN:MAX:STEP), random fill (-R), refill (-F), seed (-k)"
gds "range-write-fill" -D "$D" -d "$GPU" -w 4 -s 64M -i 64K:1M:64K -x 0 -I 1 -R -F -k 7
gds "range-read" -D "$D" -d "$GPU" -w 4 -i 64K:1M:64K -x 0 -I 0 -T "$T"
gds "range-randread" -D "$D" -d "$GPU" -w 4 -i 4K:64K:4K -x 0 -I 2 -T "$T" -k 7

say "unaligned random offsets (-U), an alignment (-a)"
gds "randread-unaligned" -D "$D" -d "$GPU" -w 4 -i 4K -x 0 -I 2 -U -T "$T"
gds "randread-align64k" -D "$D" -d "$GPU" -w 4 -i 4K -x 0 -I 2 -a 64K -T "$T"

say "a job file: a cuFile job and a CPU job at once"
mkdir -p "$D/job1" "$D/job2"
NODE=$(cat "/sys/bus/pci/devices/$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i "$GPU" |
	tr 'A-F' 'a-f' | sed 's/^0000//; s/^/0000/' | cut -c1-12)/numa_node" 2>/dev/null || echo -1)
[ "$NODE" -ge 0 ] 2>/dev/null || NODE=0
cat >"$D/two.gdsio" <<JOB
[global]
name=gpu_options
xfer_type=0
rw=write
bs=1M
size=64M
do_verify=1

[job1]
numa_node=$NODE
gpu_dev_id=$GPU
num_threads=4
directory=$D/job1

[job2]
xfer_type=1
numa_node=$NODE
num_threads=2
directory=$D/job2
JOB
gds "jobfile-write" "$D/two.gdsio"
sed -i 's/^rw=write/rw=read/' "$D/two.gdsio"
gds "jobfile-read" "$D/two.gdsio"

gdsv_table
rm -rf "$D" "$JSONDIR"
gdsv_verdict gpu_options
