#!/usr/bin/env bash
# Build the helm binary the chart tests use, from the Go module pinned in go.mod beside this script,
# with the machine's own Go toolchain (no release binary is downloaded).
#
# Usage:
#   .ci/helm/build.sh                  build if needed; the last stdout line is the helm binary's path
#   .ci/helm/build.sh --print-binary   print that path; exit 1 if it is not built yet
#
# The binary is cached in ${KAI_CACHE:-$HOME/.cache/kai}/helm/<key>/helm, where <key> names the helm
# version, the Go version and a hash of go.mod/go.sum. When it is there this script does nothing. A
# build happens in a temporary directory renamed into place at the end, under a lock, so concurrent
# callers wait for one build and an interrupted build leaves no partial cache entry.
#
# Environment:
#   KAI_CACHE           cache root (default $HOME/.cache/kai)
#   KAI_HELM_BUILD_JOBS value for `go build -p` (default: Go's default)
#   KAI_HELM_NICE       niceness of the compiler processes (default 19)
# Progress goes to stderr; only the binary's path is written to stdout.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

export GOTOOLCHAIN=local
export CGO_ENABLED=0
export GOWORK=off
# go.mod/go.sum are committed: never rewrite them during a build.
export GOFLAGS=-mod=readonly

log() { printf 'helm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

print_only=0
case "${1:-}" in
    "") ;;
    --print-binary) print_only=1 ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (try --help)" ;;
esac

mod_version() { # <module path>: its version in go.mod, in a require line or a require block
    awk -v m="$1" '($1 == m || ($1 == "require" && $2 == m)) { print ($1 == "require" ? $3 : $2); exit }' "$here/go.mod"
}
helm_version=$(mod_version helm.sh/helm/v3)
[[ -n $helm_version ]] || die "helm.sh/helm/v3 is not required in $here/go.mod"
command -v go >/dev/null || die "go is not on PATH"
go_version=$(go env GOVERSION)
mods_hash=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-12)
key="helm-${helm_version}_${go_version}_${mods_hash}"

cache_root="${KAI_CACHE:-$HOME/.cache/kai}/helm"
entry="$cache_root/$key"
binary="$entry/helm"

if ((print_only)); then
    printf '%s\n' "$binary"
    [[ -x $binary ]]
    exit
fi
if [[ -x $binary ]]; then
    printf '%s\n' "$binary"
    exit 0
fi

mkdir -p "$cache_root"
# One builder at a time per cache root; the others wait and then reuse.
exec 9>"$cache_root/.lock"
if ! flock -n 9; then
    log "another build holds $cache_root/.lock; waiting"
    flock 9
fi
if [[ -x $binary ]]; then
    printf '%s\n' "$binary"
    exit 0
fi
# Holding the lock, any temporary directory left here is from a killed build.
rm -rf "$cache_root"/.tmp-* "$entry"
tmp="$cache_root/.tmp-$key-$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"

# The version ldflags helm's own Makefile sets: its version, and the Kubernetes version its client
# libraries stand for (what `helm template` reports as .Capabilities.KubeVersion without a cluster).
client_go=$(mod_version k8s.io/client-go)
[[ $client_go =~ ^v0\.([0-9]+)\. ]] || die "cannot read the k8s.io/client-go version from $here/go.mod"
k8s_minor=${BASH_REMATCH[1]}
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$helm_version"
ldflags+=" -X helm.sh/helm/v3/internal/version.metadata= -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
build_flags=(-trimpath -buildvcs=false)
[[ -n ${KAI_HELM_BUILD_JOBS:-} ]] && build_flags+=(-p "$KAI_HELM_BUILD_JOBS")

log "cold build of helm $helm_version into $entry (minutes; cached afterwards)"
start=$SECONDS
(cd "$here" && nice -n "${KAI_HELM_NICE:-19}" \
    go build "${build_flags[@]}" -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm) ||
    die "building helm failed"
"$tmp/helm" version --short >/dev/null || die "the built helm does not run"
printf 'helm %s\ngo %s\nmodules-sha256 %s\n' "$helm_version" "$go_version" "$mods_hash" >"$tmp/versions.txt"
mv -T "$tmp" "$entry"
trap - EXIT
log "built in $((SECONDS - start))s: $binary"
printf '%s\n' "$binary"
