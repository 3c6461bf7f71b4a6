#!/usr/bin/env bash
# Build kai's OCI image without a container engine or a registry base image: a minimal Debian root file
# system made by debootstrap from Debian's packages, kai installed into a virtual environment in it (a
# wheel built from this checkout, its dependencies from PyPI), packed into an OCI image layout by umoci
# (built from its Go module), then checked: `kaid --help` and `kaictl version` run inside it as the
# non-root user 65532 on a read-only root file system.
#
# Usage:
#   .ci/image/build.sh                 build if needed; the last stdout line is the image's OCI layout dir
#   .ci/image/build.sh --print-layout  print that dir; exit 1 if it is not built yet
#   .ci/image/build.sh --check         run the check again on the built image, printing what it ran
#
# Output: ${KAI_CACHE:-$HOME/.cache/kai}/image/kaid-<version>-<key>/oci, an OCI image layout holding
# the image under the tag <version> (skopeo copy oci:DIR:<version> docker://REGISTRY/kaid:<version>).
# <key> hashes everything that goes in: the Debian suite and packages, the dependency list, kai's source
# files and this script. Intermediate steps are cached too (tools, the Debian root file system, the
# wheels of the dependencies), so a change to kai's code rebuilds only the last step. Every step builds
# in a temporary directory renamed into place, under a lock.
#
# Needs: root (debootstrap and chroot), Go, python3 with pip, and Debian's package lists (apt-get
# update) to fetch debootstrap itself.
#
# Environment:
#   KAI_CACHE            cache root (default $HOME/.cache/kai)
#   KAI_DEBIAN_MIRROR    Debian mirror for debootstrap (default http://deb.debian.org/debian)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

suite=bookworm
packages=python3           # on top of debootstrap's minbase variant
uid=65532                  # the Deployment's runAsUser / runAsGroup
mirror=${KAI_DEBIAN_MIRROR:-http://deb.debian.org/debian}

export GOTOOLCHAIN=local CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly

log() { printf 'image: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

print_only=0 check_only=0
case "${1:-}" in
    "") ;;
    --print-layout) print_only=1 ;;
    --check) check_only=1 ;;
    -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (try --help)" ;;
esac

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/pyproject.toml" | head -n 1)
[[ -n $version ]] || die "no version in $root/pyproject.toml"
sha() { sha256sum | cut -c1-12; }
base_key=$(printf '%s\n' "$suite" "$packages" "$uid" "$(sed -n '/^# ---- base/,/^# ---- end base/p' "$0")" | sha)
deps_key=$(
    {
        echo "$base_key"
        sed -n '/^dependencies/,/^]/p' "$root/pyproject.toml"
        sed -n '/^# ---- deps/,/^# ---- end deps/p' "$0"
    } | sha
)
source_files() { # what goes into kai's wheel
    cd "$root"
    git ls-files -co --exclude-standard -- pyproject.toml README.md kaid kaictl 2>/dev/null ||
        find pyproject.toml README.md kaid kaictl -type f ! -name '*.pyc'
}
source_key=$(
    {
        echo "$deps_key"
        cat "$0"
        source_files | LC_ALL=C sort | (cd "$root" && xargs -d '\n' sha256sum)
    } | sha
)
cache="${KAI_CACHE:-$HOME/.cache/kai}/image"
entry="$cache/kaid-$version-$source_key"

if ((print_only)); then
    printf '%s\n' "$entry/oci"
    [[ -f $entry/oci/index.json ]]
    exit
fi

# ---- tools: debootstrap from Debian's package, umoci from its Go module ----------------------------
debootstrap_dir() {
    local deb ver dir
    ver=$(apt-cache policy debootstrap 2>/dev/null | sed -n 's/^ *Candidate: //p')
    if [[ -z $ver || $ver == "(none)" ]]; then
        log "no debootstrap in the package lists; running apt-get update"
        apt-get update -qq >&2 || die "apt-get update failed"
        ver=$(apt-cache policy debootstrap | sed -n 's/^ *Candidate: //p')
    fi
    dir="$cache/tools/debootstrap-$ver"
    if [[ ! -x $dir/usr/sbin/debootstrap ]]; then
        log "fetching debootstrap $ver"
        mkdir -p "$tmp/deb"
        (cd "$tmp/deb" && apt-get download -q -o APT::Sandbox::User=root "debootstrap=$ver" >&2) ||
            die "apt-get download debootstrap failed"
        deb=$(ls "$tmp"/deb/debootstrap_*.deb)
        mkdir -p "$cache/tools" && dpkg-deb -x "$deb" "$tmp/debootstrap" && mv -T "$tmp/debootstrap" "$dir"
    fi
    printf '%s\n' "$dir"
}

umoci_binary() {
    local ver key bin
    ver=$(awk -v m=github.com/opencontainers/umoci '($1 == m || ($1 == "require" && $2 == m)) {
        print ($1 == "require" ? $3 : $2); exit }' "$here/umoci/go.mod")
    [[ -n $ver ]] || die "github.com/opencontainers/umoci is not required in $here/umoci/go.mod"
    key="umoci-${ver}_$(go env GOVERSION)_$(cat "$here/umoci/go.mod" "$here/umoci/go.sum" | sha)"
    bin="$cache/tools/$key/umoci"
    if [[ ! -x $bin ]]; then
        log "building umoci $ver from its Go module"
        mkdir -p "$tmp/umoci" "$cache/tools"
        (cd "$here/umoci" && nice -n 19 go build -trimpath -buildvcs=false \
            -ldflags "-s -w -X main.version=${ver#v}" -o "$tmp/umoci/umoci" \
            github.com/opencontainers/umoci/cmd/umoci) || die "building umoci failed"
        mv -T "$tmp/umoci" "$cache/tools/$key"
    fi
    printf '%s\n' "$bin"
}

# In the image's root file system: a clean environment, so nothing of this machine's leaks in.
in_root() { # <rootfs> <command...>
    local rootfs=$1
    shift
    chroot "$rootfs" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

# ---- base: Debian minbase + python3, trimmed, with the user kai ------------------------------------
base_rootfs() {
    local dir="$cache/base-$suite-$base_key" dbs
    if [[ ! -f $dir/.complete ]]; then
        dbs=$(debootstrap_dir)
        log "debootstrap $suite (minbase + $packages) from $mirror"
        rm -rf "$dir"
        DEBOOTSTRAP_DIR="$dbs/usr/share/debootstrap" "$dbs/usr/sbin/debootstrap" --variant=minbase \
            --include="$packages" "$suite" "$tmp/base" "$mirror" >&2 || die "debootstrap failed"
        # What a running image never needs: package caches and lists, docs (licences stay), man pages.
        rm -rf "$tmp"/base/var/cache/apt/* "$tmp"/base/var/lib/apt/lists/* "$tmp"/base/var/log/* \
            "$tmp"/base/usr/share/man/* "$tmp"/base/usr/share/info/* "$tmp"/base/usr/share/locale/*
        find "$tmp/base/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
        find "$tmp/base/usr/share/doc" -mindepth 1 -type d -empty -delete
        echo "kai:x:$uid:$uid:kai:/nonexistent:/usr/sbin/nologin" >>"$tmp/base/etc/passwd"
        echo "kai:x:$uid:" >>"$tmp/base/etc/group"
        echo "kai:!:19000::::::" >>"$tmp/base/etc/shadow"
        touch "$tmp/base/.complete"
        mv -T "$tmp/base" "$dir"
    fi
    printf '%s\n' "$dir"
}
# ---- end base

# ---- the dependencies' wheels, fetched by pip running on the image's own Python (so tags match) ----
pip_wheel() { # a pip wheel from PyPI; pip runs from it without being installed
    mkdir -p "$cache/tools/pip"
    if ! ls "$cache"/tools/pip/pip-*.whl >/dev/null 2>&1; then
        python3 -m pip download -q --no-deps --only-binary=:all: -d "$cache/tools/pip" pip >&2 ||
            die "cannot fetch pip's wheel from PyPI"
    fi
    ls "$cache"/tools/pip/pip-*.whl | tail -n 1
}

wheelhouse() { # <base rootfs> <kai wheel>
    local base=$1 kai_wheel=$2 dir="$cache/wheels-$deps_key" pip ca
    if [[ ! -f $dir/.complete ]]; then
        log "fetching kai's dependencies from PyPI for the image's Python"
        pip=$(pip_wheel)
        rm -rf "$tmp/rootfs-wh" && cp -a "$base" "$tmp/rootfs-wh"
        mkdir -p "$tmp/rootfs-wh/build"
        cp "$pip" "$kai_wheel" "$tmp/rootfs-wh/build/"
        cp -L /etc/resolv.conf "$tmp/rootfs-wh/etc/resolv.conf"
        # This machine's CA bundle, for pip's HTTPS only; it does not reach the image.
        ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}} cert=()
        if [[ -f $ca ]]; then
            cp -L "$ca" "$tmp/rootfs-wh/build/ca.crt"
            cert=(PIP_CERT=/build/ca.crt)
        fi
        in_root "$tmp/rootfs-wh" "${cert[@]}" PIP_DISABLE_PIP_VERSION_CHECK=1 \
            python3 "/build/$(basename "$pip")/pip" download -q --only-binary=:all: -d /build/wheels \
            "/build/$(basename "$kai_wheel")" >&2 || die "pip download of kai's dependencies failed"
        mkdir -p "$tmp/wheels"
        find "$tmp/rootfs-wh/build/wheels" -name '*.whl' ! -name 'kai-*' -exec mv {} "$tmp/wheels/" \;
        rm -rf "$tmp/rootfs-wh"
        touch "$tmp/wheels/.complete"
        mv -T "$tmp/wheels" "$dir"
    fi
    printf '%s\n' "$dir"
}

# ---- the check: kaid --help and kaictl version in the image, as user 65532 on a read-only root -------
check_image() { # <layout> <scratch dir>; prints what it ran and saw
    local layout=$1 dir=$2 umoci help
    umoci=$(umoci_binary)
    log "checking the image: kaid --help and kaictl version as user $uid on a read-only root"
    rm -rf "$dir"
    "$umoci" unpack --image "$layout:$version" "$dir" >&2
    in_image() { # a command in the unpacked image: read-only root, a fresh /tmp, the image's user and env
        unshare --mount --fork sh -ec '
            rootfs=$1; uid=$2; shift 2
            mount --bind "$rootfs" "$rootfs"
            mount -o remount,bind,ro "$rootfs"
            mount -t tmpfs tmpfs "$rootfs/tmp"
            mount -t proc proc "$rootfs/proc"
            exec chroot --userspec="$uid:$uid" "$rootfs" /usr/bin/env -i HOME=/nonexistent LANG=C.UTF-8 \
                PATH=/opt/kai/bin:/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1 "$@"
        ' check "$dir/rootfs" "$uid" "$@" 2>&1
    }
    help=$(in_image kaid --help) && [[ $help == *"Usage: kaid"* ]] || die "kaid --help failed in the image: $help"
    printf '$ kaid --help\n%s\n' "$help"
    [[ $(in_image kaictl version) == "kaictl $version" ]] || die "kaictl version did not print 'kaictl $version'"
    printf '$ kaictl version\n%s\n' "$(in_image kaictl version)"
    printf '$ id\n%s\n' "$(in_image id)"
    printf '$ touch /opt/kai/x\n%s\n' "$(in_image touch /opt/kai/x || true)"
    rm -rf "$dir"
}

if ((check_only)); then
    [[ -f $entry/oci/index.json ]] || die "no image built yet at $entry: run $0"
    [[ $(id -u) == 0 ]] || die "needs root (chroot)"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    check_image "$entry/oci" "$tmp/check"
    exit 0
fi

if [[ -f $entry/oci/index.json ]]; then
    printf '%s\n' "$entry/oci"
    exit 0
fi

[[ $(id -u) == 0 ]] || die "needs root (debootstrap and chroot)"
mkdir -p "$cache"
exec 9>"$cache/.lock"
if ! flock -n 9; then
    log "another build holds $cache/.lock; waiting"
    flock 9
fi
if [[ -f $entry/oci/index.json ]]; then
    printf '%s\n' "$entry/oci"
    exit 0
fi
# Holding the lock, any temporary directory left here is from a killed build.
rm -rf "$cache"/.tmp-*
tmp="$cache/.tmp-$$"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"
start=$SECONDS

# ---- deps: the first layer, the Debian root file system with /opt/kai holding kai's dependencies -----
# Kept with its unpacked bundle, so that kai's own layer is only what kai's wheel adds.
deps_image() { # <base rootfs> <wheelhouse>
    local base=$1 wheels=$2 dir="$cache/deps-$deps_key" pip wheel names=()
    if [[ ! -f $dir/.complete ]]; then
        log "installing kai's dependencies into /opt/kai (the image's first layer)"
        pip=$(pip_wheel)
        rm -rf "$tmp/deps" && mkdir -p "$tmp/deps"
        "$umoci" init --layout "$tmp/deps/oci"
        "$umoci" new --image "$tmp/deps/oci:deps"
        "$umoci" unpack --image "$tmp/deps/oci:deps" "$tmp/deps/bundle" >&2
        rm -rf "$tmp/deps/bundle/rootfs" && cp -a "$base" "$tmp/deps/bundle/rootfs"
        local rootfs="$tmp/deps/bundle/rootfs"
        rm -f "$rootfs/.complete"
        mkdir -p "$rootfs/build/wheels"
        cp "$pip" "$rootfs/build/"
        for wheel in "$wheels"/*.whl; do
            cp "$wheel" "$rootfs/build/wheels/"
            names+=("/build/wheels/$(basename "$wheel")")
        done
        in_root "$rootfs" python3 -m venv --without-pip /opt/kai || die "python3 -m venv failed"
        in_root "$rootfs" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 /opt/kai/bin/python \
            "/build/$(basename "$pip")/pip" install -q --no-index --no-deps "${names[@]}" >&2 ||
            die "installing kai's dependencies into the image failed"
        rm -rf "$rootfs/build" "$rootfs"/tmp/* "$rootfs"/root/.cache
        : >"$rootfs/etc/resolv.conf" # the runtime provides it
        "$umoci" repack --refresh-bundle --image "$tmp/deps/oci:deps" \
            --history.created_by "debootstrap $suite minbase + $packages; kai's dependencies in /opt/kai" \
            "$tmp/deps/bundle" >&2
        touch "$tmp/deps/.complete"
        mv -T "$tmp/deps" "$dir"
    fi
    printf '%s\n' "$dir"
}
# ---- end deps

# ---- kai ----------------------------------------------------------------------------------------------
log "building kaid $version ($entry)"
umoci=$(umoci_binary)
base=$(base_rootfs)
mkdir -p "$tmp/dist"
python3 -m pip wheel -q --no-deps -w "$tmp/dist" "$root" >&2 || die "building kai's wheel failed"
kai_wheel=$(ls "$tmp"/dist/kai-*.whl)
wheels=$(wheelhouse "$base" "$kai_wheel")
deps=$(deps_image "$base" "$wheels")
pip=$(pip_wheel)

# The dependencies' layout, linked (blobs are never written in place; index.json, which umoci rewrites,
# is copied), and their bundle, copied (umoci's diff counts a file's links, so a linked tree would differ
# in every file).
log "installing kai into /opt/kai (the image's second layer)"
layout="$tmp/out/oci"
mkdir -p "$tmp/out" "$tmp/bundle"
cp -al "$deps/oci" "$layout"
cp --remove-destination "$deps/oci/index.json" "$layout/index.json"
cp -a "$deps/bundle/." "$tmp/bundle/"
rootfs="$tmp/bundle/rootfs"
mkdir -p "$rootfs/build"
cp "$pip" "$kai_wheel" "$rootfs/build/"
in_root "$rootfs" PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 /opt/kai/bin/python \
    "/build/$(basename "$pip")/pip" install -q --no-index "/build/$(basename "$kai_wheel")" >&2 ||
    die "installing kai into the image failed"
rm -rf "$rootfs/build"
rootfs_bytes=$(du -sb "$rootfs" | cut -f1)

log "packing the OCI image"
"$umoci" repack --image "$layout:$version" --history.created_by "kai $version: pip install kai" "$tmp/bundle" >&2
"$umoci" rm --image "$layout:deps"
"$umoci" config --image "$layout:$version" \
    --config.user "$uid:$uid" \
    --config.entrypoint kaid \
    --config.cmd run --config.cmd --config --config.cmd /etc/kai/config.yaml \
    --config.env PATH=/opt/kai/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --config.env PYTHONDONTWRITEBYTECODE=1 --config.env PYTHONUNBUFFERED=1 --config.env LANG=C.UTF-8 \
    --config.workingdir / \
    --config.exposedports 8080/tcp \
    --config.label "org.opencontainers.image.title=kaid" \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.description=kai, a GPU scheduler for Kubernetes (kaid, kaictl)" \
    --history.created_by ".ci/image/build.sh: user, entry point, environment"
"$umoci" gc --layout "$layout"
rm -rf "$tmp/bundle"

check_image "$layout" "$tmp/check" >/dev/null

{
    echo "kai $version"
    echo "debian $suite minbase + $packages ($mirror)"
    echo "umoci $("$umoci" --version | head -n 1 | awk '{print $NF}')"
    echo "root file system $rootfs_bytes bytes"
    echo "image $(du -sb "$layout" | cut -f1) bytes in the OCI layout (compressed)"
} >"$tmp/out/versions.txt"
mv -T "$tmp/out" "$entry"
trap - EXIT
rm -rf "$tmp"
log "built in $((SECONDS - start))s: $entry/oci (tag $version)"
printf '%s\n' "$entry/oci"
