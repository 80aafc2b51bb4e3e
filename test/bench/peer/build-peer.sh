#!/usr/bin/env bash
# build-peer.sh: builds the comparison peer of `make bench-peer`, kube-apiserver
# v1.34.4 and etcd v3.6.4, from the Go module proxy into a cache folder, and
# prints the two paths as KUBE_APISERVER_BIN=... and ETCD_BIN=... lines
# (shell-quoted, for eval).
#
# Nothing is built when the binaries are already there: KUBE_APISERVER_BIN and
# ETCD_BIN name ready-made ones; otherwise PEER_CACHE (default
# ~/.cache/setpoint/peer/v1.34.4) holds what an earlier run built. The first
# build of kube-apiserver takes half an hour or more on two cores; later ones
# come from the Go build cache. etcd takes a minute or two.
set -euo pipefail

K8S_VERSION=v1.34.4
ETCD_VERSION=v3.6.4
here=$(cd "$(dirname "$0")" && pwd)
cache=${PEER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/setpoint/peer/$K8S_VERSION}
kas=${KUBE_APISERVER_BIN:-$cache/kube-apiserver}
etcd=${ETCD_BIN:-$cache/etcd}

say() { echo "build-peer: $*" >&2; }
# report prints the two paths as shell assignments, for eval.
report() { printf 'KUBE_APISERVER_BIN=%q\nETCD_BIN=%q\n' "$kas" "$etcd"; }

if [[ -x $kas && -x $etcd ]]; then
	report
	exit 0
fi
if [[ -n ${KUBE_APISERVER_BIN:-} && ! -x $kas ]]; then
	say "KUBE_APISERVER_BIN=$kas is not an executable file"; exit 1
fi
if [[ -n ${ETCD_BIN:-} && ! -x $etcd ]]; then
	say "ETCD_BIN=$etcd is not an executable file"; exit 1
fi

GO=${GO:-go}
command -v "$GO" >/dev/null || GO=/usr/local/go/bin/go
mkdir -p "$cache/src"
# One build at a time per cache folder: a second caller waits for the first
# and then finds the binaries.
exec 9>"$cache/.lock"
flock 9
if [[ -x $kas && -x $etcd ]]; then
	report
	exit 0
fi

# The build module is copied out so that resolving it never edits the
# checkout.
cp "$here/peerbuild/go.mod" "$here/peerbuild/go.sum" "$cache/src/"
cd "$cache/src"
export GOFLAGS=-mod=mod

# The version strings kube-apiserver reports (and client-go's user agent).
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
done
ld+=" -X k8s.io/component-base/version.gitTreeState=clean"

t0=$SECONDS
say "downloading modules for kube-apiserver $K8S_VERSION and etcd $ETCD_VERSION"
"$GO" mod download k8s.io/kubernetes go.etcd.io/etcd/server/v3
if [[ ! -x $etcd ]]; then
	say "building etcd"
	"$GO" build -trimpath -ldflags "-s -w" -o "$cache/etcd.tmp" go.etcd.io/etcd/server/v3
	mv "$cache/etcd.tmp" "$cache/etcd"
	say "etcd built in $((SECONDS - t0)) s"
fi
if [[ ! -x $kas ]]; then
	t1=$SECONDS
	say "building kube-apiserver (the first time takes half an hour or more)"
	"$GO" build -trimpath -ldflags "$ld" -o "$cache/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
	mv "$cache/kube-apiserver.tmp" "$cache/kube-apiserver"
	say "kube-apiserver built in $((SECONDS - t1)) s"
fi
report
