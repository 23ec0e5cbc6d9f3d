#!/usr/bin/env bash
# Build perftest (ib_write_bw, ib_read_bw, ib_write_lat ...) with CUDA, for GPUDirect RDMA rows:
# Debian's perftest package is built without it (its --help has no --use_cuda).
#
#   scripts/build-perftest-cuda.sh fetch         Debian's perftest source into .cache/perftest/
#                                                (apt-get source --download-only; needs deb-src)
#   scripts/build-perftest-cuda.sh build [SRC]   build and install into PREFIX; SRC is a source
#                                                directory or tarball (default: the .orig tarball
#                                                in .cache/perftest/, carried to a machine without
#                                                a package mirror)
#   scripts/build-perftest-cuda.sh check         say whether PREFIX's ib_write_bw has CUDA
#
# CUDA 13 changed the context-creation API: perftest releases before upstream's "keep CUDA context
# creation ABI-stable" (2026; Debian bookworm's 4.5+0.17 and the 4.5-0.20 tag among them) configure
# but do not compile against it; use a newer source there (a GitHub snapshot with ./autogen.sh run).
# Environment: PREFIX (/opt/perftest-cuda: the role's gds_rdma_bench_perftest_dir is
# PREFIX/bin), CUDA_HOME (/usr/local/cuda), CACHE_DIR (.cache/perftest), BUILD_DIR
# (build/perftest-cuda), JOBS (nproc), RDMA_DEBS (a directory of rdma-core .deb files:
# libibverbs1/-dev, librdmacm1/-dev, libibumad3/-dev, libpci3/-dev, libnl-3/-route-3, ibverbs-providers;
# unpacked into BUILD_DIR/sysroot and linked with an rpath to it, for a node without those packages
# and without a package mirror). Needs a C compiler, make, the rdma-core headers (Debian:
# libibverbs-dev librdmacm-dev libibumad-dev libpci-dev, or RDMA_DEBS) and, for a source without
# ./configure, autoconf automake libtool.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PREFIX=${PREFIX:-/opt/perftest-cuda}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CACHE_DIR=${CACHE_DIR:-$ROOT/.cache/perftest}
BUILD_DIR=${BUILD_DIR:-$ROOT/build/perftest-cuda}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

die() { echo "build-perftest-cuda: $*" >&2; exit 1; }

# the help text first: perftest exits non-zero after --help, and grep -q closing the pipe early
# would fail the pipeline under pipefail
has_cuda() {
	local help
	help=$("$1" --help 2>&1) || true
	grep -q -- '--use_cuda' <<<"$help"
}

fetch() {
	mkdir -p "$CACHE_DIR"
	cd "$CACHE_DIR"
	apt-get source --download-only perftest ||
		die "apt-get source failed (no deb-src line in /etc/apt/sources.list*?); put perftest's source tarball (perftest_*.orig.tar.gz or a GitHub release perftest-*.tar.gz) into $CACHE_DIR"
	ls -1 "$CACHE_DIR"
}

# find_source: the newest tarball in CACHE_DIR
find_source() {
	local found
	found=$(ls -1t "$CACHE_DIR"/perftest_*.orig.tar.* "$CACHE_DIR"/perftest-*.tar.gz 2>/dev/null | head -n 1 || true)
	[ -n "$found" ] || die "no perftest source in $CACHE_DIR: run '$0 fetch' where apt can reach a mirror, and carry $CACHE_DIR along"
	echo "$found"
}

build() {
	local src=${1:-} tree
	[ -n "$src" ] || src=$(find_source)
	[ -e "$src" ] || die "$src does not exist"
	[ -r "$CUDA_HOME/include/cuda.h" ] || die "$CUDA_HOME/include/cuda.h not found: set CUDA_HOME to the CUDA toolkit"
	rm -rf "$BUILD_DIR"
	mkdir -p "$BUILD_DIR"
	local cppflags=${CPPFLAGS:-} ldflags=${LDFLAGS:-}
	if [ -n "${RDMA_DEBS:-}" ]; then
		local sysroot=$BUILD_DIR/sysroot lib deb
		mkdir -p "$sysroot"
		for deb in "$RDMA_DEBS"/*.deb; do
			[ -e "$deb" ] || die "RDMA_DEBS=$RDMA_DEBS holds no .deb files"
			dpkg-deb -x "$deb" "$sysroot" || die "cannot unpack $deb"
		done
		lib=$sysroot/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
		cppflags="-I$sysroot/usr/include -I$sysroot/usr/include/$(basename "$lib") $cppflags"
		# the binaries find libibverbs and its providers there at run time too
		ldflags="-L$lib -Wl,-rpath,$lib -Wl,-rpath-link,$lib $ldflags"
	fi
	for header in infiniband/verbs.h rdma/rdma_cma.h; do
		# shellcheck disable=SC2086 # word splitting of the flags is wanted
		echo "#include <$header>" | ${CC:-cc} $cppflags -E -x c - >/dev/null 2>&1 ||
			die "<$header> not found: install libibverbs-dev librdmacm-dev libibumad-dev libpci-dev (rdma-core)"
	done
	if [ -d "$src" ]; then
		cp -a "$src/." "$BUILD_DIR/src"
	else
		mkdir -p "$BUILD_DIR/src"
		tar -xf "$src" -C "$BUILD_DIR/src" --strip-components=1
	fi
	tree=$BUILD_DIR/src
	cd "$tree"
	if [ ! -x ./configure ]; then
		[ -x ./autogen.sh ] || die "$src has neither ./configure nor ./autogen.sh"
		./autogen.sh >"$BUILD_DIR/autogen.log" 2>&1 || die "autogen.sh failed (autoconf, automake, libtool?): $BUILD_DIR/autogen.log"
	fi
	echo "build-perftest-cuda: configure with CUDA_H_PATH=$CUDA_HOME/include/cuda.h, prefix $PREFIX"
	./configure --prefix="$PREFIX" CUDA_H_PATH="$CUDA_HOME/include/cuda.h" \
		CPPFLAGS="$cppflags" CFLAGS="${CFLAGS:--O2} $cppflags" \
		LDFLAGS="-L$CUDA_HOME/lib64 -L$CUDA_HOME/lib64/stubs $ldflags" \
		>"$BUILD_DIR/configure.log" 2>&1 || die "configure failed: $BUILD_DIR/configure.log"
	make -j"$JOBS" >"$BUILD_DIR/make.log" 2>&1 || { tail -n 25 "$BUILD_DIR/make.log" >&2; die "make failed: $BUILD_DIR/make.log"; }
	make install >"$BUILD_DIR/install.log" 2>&1 || die "make install into $PREFIX failed: $BUILD_DIR/install.log"
	check
}

check() {
	local bin=$PREFIX/bin/ib_write_bw
	[ -x "$bin" ] || die "$bin not found"
	has_cuda "$bin" || die "$bin was built without CUDA (its --help has no --use_cuda): see $BUILD_DIR/configure.log"
	echo "build-perftest-cuda: $bin has CUDA ($("$bin" --version 2>&1 | head -n 1))"
}

case ${1:-build} in
fetch) fetch ;;
build) shift || true; build "${1:-}" ;;
check) check ;;
-h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0" ;;
*) die "usage: $0 fetch | build [SRC] | check" ;;
esac
