#!/usr/bin/env bash
# Build Dockerfile.build with buildah (daemonless) on a machine that cannot pull from any registry:
# 1. make a base image locally (Debian via debootstrap + a venv /opt/venv with torch: the stand-in
#    for a CUDA + torch image), 2. build Dockerfile.build's stages on it with BASE pointing there.
#
#   bash scripts/buildah-local-base.sh [WORKDIR]          # as root; apt-get install buildah debootstrap
#
# Env:
#   FLAVOR=cpu   (default) torch from TORCH_WHEEL (default: the first /opt/wheels/torch-*.whl, a CPU build).
#                The build must STOP at `kernelcheck install` with exit 3: nothing can be installed for
#                sm_90 on a CPU torch. That proves the build stage runs and that a refusal blocks.
#   FLAVOR=cuda  torch from TORCH_WHEEL (a CUDA build, e.g. torch-2.14.1 cu130) + its nvidia-* wheels
#                from PyPI, plus nvcc from CUDA_DIR (default /usr/local/cuda) and g++: a "-devel" base.
#                install then fetches fla-core and compiles causal-conv1d for ARCH, and the gate runs.
#   MODEL (qwen3.8-27b) ARCH (9.0) MODE (train)
#   ISOLATION (chroot: this host's crun fails with "cgroups in hybrid mode not supported")
set -euo pipefail
WORK="${1:-/tmp/kernelcheck-buildah}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
FLAVOR="${FLAVOR:-cpu}"
ISOLATION="${ISOLATION:-chroot}"
if [ "$FLAVOR" = cpu ]; then
    TORCH_WHEEL="${TORCH_WHEEL:-$(ls /opt/wheels/torch-*.whl 2>/dev/null | head -1)}"
else
    : "${TORCH_WHEEL:?FLAVOR=cuda needs TORCH_WHEEL=/path/to/torch-<ver>-cp311-...whl (a CUDA build)}"
    CUDA_DIR="$(readlink -f "${CUDA_DIR:-/usr/local/cuda}")"
fi
BASE_IMAGE="localhost/kernelcheck-base:$FLAVOR"
mkdir -p "$WORK"
DEBOOT="$WORK/rootfs"            # plain debootstrap, shared by both flavors
ROOTFS="$WORK/rootfs-$FLAVOR"    # + the venv with torch (+ nvcc for cuda)

if [ ! -x "$DEBOOT/usr/bin/python3" ]; then
    echo "== debootstrap bookworm (minbase + python3)"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
        bookworm "$DEBOOT" http://deb.debian.org/debian
fi
if [ ! -x "$ROOTFS/opt/venv/bin/python" ]; then
    rm -rf "$ROOTFS" && cp -a "$DEBOOT" "$ROOTFS"
    cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
    # This machine reaches PyPI through a TLS-inspecting proxy: the base trusts what the host trusts.
    cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
    if [ "$FLAVOR" = cuda ]; then
        echo "== g++ and Python headers (what a -devel image has), nvcc from $CUDA_DIR"
        chroot "$ROOTFS" apt-get update -q >/dev/null
        chroot "$ROOTFS" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q g++ python3-dev >/dev/null
        cp -a "$CUDA_DIR" "$ROOTFS/usr/local/" && ln -sfn "$(basename "$CUDA_DIR")" "$ROOTFS/usr/local/cuda"
    fi
    echo "== torch ($(basename "$TORCH_WHEEL")) and transformers into /opt/venv of the base"
    mkdir -p "$ROOTFS/tmp/wheels" && cp "$TORCH_WHEEL" "$ROOTFS/tmp/wheels/"
    chroot "$ROOTFS" python3 -m venv /opt/venv
    chroot "$ROOTFS" env -i PATH=/usr/bin:/bin PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
        /opt/venv/bin/pip install --quiet --no-cache-dir --disable-pip-version-check \
        "/tmp/wheels/$(basename "$TORCH_WHEEL")" 'transformers==5.24.*'
    rm -rf "$ROOTFS/tmp/wheels"
fi

if buildah inspect --type image "$BASE_IMAGE" >/dev/null 2>&1 && [ -z "${REIMPORT:-}" ]; then
    echo "== $BASE_IMAGE exists (REIMPORT=1 to import the rootfs again)"
else
echo "== import the rootfs as $BASE_IMAGE"
ctr=$(buildah from scratch)
mnt=$(buildah mount "$ctr")
cp -a "$ROOTFS/." "$mnt/"
buildah umount "$ctr" >/dev/null
buildah config --env PATH=/opt/venv/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --cmd /bin/bash "$ctr"
[ "$FLAVOR" = cuda ] && buildah config --env CUDA_HOME=/usr/local/cuda "$ctr"
buildah commit --quiet "$ctr" "$BASE_IMAGE" >/dev/null
buildah rm "$ctr" >/dev/null
fi

echo "== buildah bud -f Dockerfile.build (BASE=$BASE_IMAGE)"
set +e
# --format docker: the OCI format drops SHELL (and with it pipefail).
buildah bud --isolation "$ISOLATION" --format docker --layers -f "$REPO/Dockerfile.build" \
    --build-arg "BASE=$BASE_IMAGE" --build-arg "MODEL=${MODEL:-qwen3.8-27b}" \
    --build-arg "ARCH=${ARCH:-9.0}" --build-arg "MODE=${MODE:-train}" \
    -t "localhost/kernelcheck-gate-test:$FLAVOR" "$REPO" 2>&1 | tee "$WORK/bud-$FLAVOR.log"
rc=${PIPESTATUS[0]}
set -e
echo "== buildah bud exit: $rc (log: $WORK/bud-$FLAVOR.log)"
exit "$rc"
