#!/usr/bin/env bash
# bundle.sh: builds the benchmark bundle that run.sh runs on a machine with
# no Go toolchain (`make bench-bundle`; see run.sh for the procedure).
#
# It writes bench-bundle/setpoint-bench.tar.xz (ignored by git), one xz'd tar
# of setpoint-bench/ holding:
#   bin/setpoint                    the server, stripped (-s -w, -trimpath)
#   bin/wasm/widget-plugin.wasm     the Wasm plugin BenchmarkReconcile loads
#   tests/PKG.test                  stripped test binaries of test/bench/PKG
#   examples/widget/*.yaml          the CRDs the benchmarks register
#   peer/etcd, peer/kube-apiserver  the peer of test/bench/peer (build-peer.sh)
#   MANIFEST                        commit, Go version, sizes and sha256s
# The bundle is the root the test binaries look in (SETPOINT_ROOT).
#
# Knobs: BENCH_PKGS (packages under test/bench, default "reconcile api peer
# watch"), BUNDLE_MAX_MIB (what a device run may carry: 64 MiB less the
# files of the checkout that travel with it, less 1 MiB; when the bundle is
# larger it is rebuilt without kube-apiserver, and run.sh then measures
# Setpoint's side of the peer benchmark only), PEER=0 (leave the
# peer out: no build-peer.sh; the api benchmark then needs etcd on the
# device), XZ_OPTS (--lzma2=preset=9,dict=512MiB: a dictionary as large
# as the whole tar lets xz find the libraries the binaries share, which
# takes the bundle from a quarter of its size to about a sixth; about 6 GiB
# of memory to compress, 512 MiB to unpack).
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$PWD
GO=${GO:-go}
pkgs=${BENCH_PKGS:-reconcile api peer watch}
# The checkout's files that travel beside the bundle: tracked, and
# untracked but not ignored.
tree_mib=$(git ls-files --cached --others --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null |
	awk '{ s += $1 } END { printf "%d", s / 1048576 + 1 }')
max_mib=${BUNDLE_MAX_MIB:-$((64 - tree_mib - 1))}
xz_opts=${XZ_OPTS:---lzma2=preset=9,dict=512MiB}
outdir=$root/bench-bundle
stage=$root/bin/bench-stage
top=$stage/setpoint-bench
say() { echo "bench-bundle: $*" >&2; }

rm -rf "$stage"
mkdir -p "$top/bin/wasm" "$top/tests" "$top/peer" "$top/examples/widget" "$outdir"

say "building bin/setpoint"
"$GO" build -trimpath -buildvcs=false -ldflags='-s -w' -o "$top/bin/setpoint" ./cmd/setpoint
for p in $pkgs; do
	say "building tests/$p.test"
	"$GO" test -c -trimpath -buildvcs=false -ldflags='-s -w' -o "$top/tests/$p.test" "./test/bench/$p"
done
./.ci/build-wasm examples/widget/plugin
cp bin/wasm/widget-plugin.wasm "$top/bin/wasm/"
cp examples/widget/*.yaml "$top/examples/widget/"

if [[ ${PEER:-1} != 0 ]]; then
	peer=$(./test/bench/peer/build-peer.sh)
	eval "$peer"
	cp "$ETCD_BIN" "$top/peer/etcd"
	cp "$KUBE_APISERVER_BIN" "$top/peer/kube-apiserver"
fi

# manifest writes MANIFEST: what was built from what, and each file's size
# and sha256.
manifest() {
	{
		echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$( [[ -z $(git status --porcelain -uno 2>/dev/null) ]] || echo ' (with uncommitted changes)')"
		echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $("$GO" version)"
		echo "packages $pkgs"
		(cd "$top" && find . -type f ! -name MANIFEST | sort | while read -r f; do
			printf '%s %10d %s\n' "$(sha256sum "$f" | cut -c1-16)" "$(stat -c %s "$f")" "${f#./}"
		done)
	} >"$top/MANIFEST"
}

archive=$outdir/setpoint-bench.tar.xz
pack() {
	manifest
	say "compressing (xz $xz_opts; minutes)"
	# shellcheck disable=SC2086
	tar -C "$stage" -cf - setpoint-bench | xz $xz_opts -T1 >"$archive.tmp"
	mv "$archive.tmp" "$archive"
}
mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f", b / 1048576 }'; }

pack
if (($(stat -c %s "$archive") > max_mib * 1048576)) && [[ -f $top/peer/kube-apiserver ]]; then
	say "$(mib "$archive") MiB is over $max_mib MiB: leaving kube-apiserver out (the peer benchmark then measures Setpoint's side only)"
	rm "$top/peer/kube-apiserver"
	pack
fi
size=$(stat -c %s "$archive")
say "$archive: $(mib "$archive") MiB (limit $max_mib MiB: 64 less ${tree_mib} MiB of the checkout, less 1)"
sed 's/^/  /' "$top/MANIFEST" >&2
rm -rf "$stage"
if ((size > max_mib * 1048576)); then
	say "still over $max_mib MiB: drop packages with BENCH_PKGS"
	exit 1
fi
