#!/usr/bin/env bash
# Build the local Kubernetes control plane used by the end-to-end tests:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok,
# compiled from the Go modules pinned in k8s/, etcd/ and kwok/ next to this
# script, with the machine's own Go toolchain (no containers, no downloads of
# prebuilt binaries).
#
# Usage:
#   .ci/controlplane/build.sh                 build if needed; last stdout line is the bin dir
#   .ci/controlplane/build.sh --print-bindir  print the bin dir; exit 1 if it is not built yet
#
# Binaries are cached in ${KAI_CACHE:-$HOME/.cache/kai}/controlplane/<key>/bin,
# where <key> names every pinned version, the Go version and a hash of the
# go.mod/go.sum files. When they are all there this script does nothing. A
# build happens in a temporary directory that is renamed into place at the
# end, so an interrupted build never leaves a partial cache entry.
#
# Environment:
#   KAI_CACHE               cache root (default $HOME/.cache/kai)
#   KAI_CP_BUILD_JOBS       value for `go build -p` (default: Go's default)
#   KAI_CP_NICE             niceness of the compiler processes (default 19)
# Progress goes to stderr; only the bin dir is written to stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOWORK=off
# The go.mod/go.sum files are committed: never rewrite them during a build.
export GOFLAGS=-mod=readonly

log() { printf 'controlplane: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

print_only=0
case "${1:-}" in
    "") ;;
    --print-bindir) print_only=1 ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (try --help)" ;;
esac

# Pinned versions, read from the wrapper modules (single source of truth).
mod_version() { # <go.mod> <module path>
    local v
    v=$(awk -v m="$2" '($1 == m || ($1 == "require" && $2 == m)) { print ($1 == "require" ? $3 : $2); exit }' "$1")
    [[ -n $v ]] || die "$2 is not required in $1"
    printf '%s' "$v"
}
k8s_version=$(mod_version "$here/k8s/go.mod" k8s.io/kubernetes)
etcd_version=$(mod_version "$here/etcd/go.mod" go.etcd.io/etcd/server/v3)
kwok_version=$(mod_version "$here/kwok/go.mod" sigs.k8s.io/kwok)

command -v go >/dev/null || die "go is not on PATH"
go_version=$(go env GOVERSION)
mods_hash=$(cd "$here" && cat k8s/go.mod k8s/go.sum etcd/go.mod etcd/go.sum kwok/go.mod kwok/go.sum |
    sha256sum | cut -c1-12)
key="k8s-${k8s_version}_etcd-${etcd_version}_kwok-${kwok_version}_${go_version}_${mods_hash}"

cache_root="${KAI_CACHE:-$HOME/.cache/kai}/controlplane"
entry="$cache_root/$key"
bindir="$entry/bin"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

complete() {
    local b
    for b in "${binaries[@]}"; do
        [[ -x "$bindir/$b" ]] || return 1
    done
}

if ((print_only)); then
    printf '%s\n' "$bindir"
    complete
    exit
fi

if complete; then
    printf '%s\n' "$bindir"
    exit 0
fi

mkdir -p "$cache_root"
# One builder at a time per cache root; the others wait and then reuse.
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
    log "another build holds $cache_root/.lock; waiting"
    flock 9
fi
if complete; then
    printf '%s\n' "$bindir"
    exit 0
fi
# Holding the lock, any temporary directory left here is from a killed build.
rm -rf "$cache_root"/.tmp-* "$entry"

tmp="$cache_root/.tmp-$key-$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"

build_flags=(-trimpath -buildvcs=false)
[[ -n ${KAI_CP_BUILD_JOBS:-} ]] && build_flags+=(-p "$KAI_CP_BUILD_JOBS")

k8s_minor=${k8s_version#v1.}
k8s_minor=${k8s_minor%%.*}
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    k8s_ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$k8s_minor"
    k8s_ldflags+=" -X $pkg.gitTreeState=clean"
done

build() { # <module dir> <output name> <package> <ldflags>
    local start=$SECONDS
    log "building $2 ($3) ..."
    (cd "$here/$1" && nice -n "${KAI_CP_NICE:-19}" \
        go build "${build_flags[@]}" -ldflags "$4" -o "$tmp/bin/$2" "$3") ||
        die "building $2 failed"
    log "built $2 in $((SECONDS - start))s"
}

log "cold build into $entry (tens of minutes on 2 cores; cached afterwards)"
total_start=$SECONDS
build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
build kwok kwok sigs.k8s.io/kwok/cmd/kwok "-s -w"
build k8s kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build k8s kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build k8s kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"

cat >"$tmp/versions.txt" <<EOF
kubernetes $k8s_version
etcd $etcd_version
kwok $kwok_version
go $go_version
modules-sha256 $mods_hash
EOF
mv -T "$tmp" "$entry"
trap - EXIT
log "done in $((SECONDS - total_start))s: $bindir"
printf '%s\n' "$bindir"
