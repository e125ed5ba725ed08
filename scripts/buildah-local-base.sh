#!/usr/bin/env bash
# Build Dockerfile.build with buildah (daemonless) on a machine that cannot pull from any registry:
# 1. make a base image locally (Debian via debootstrap + a venv with a CPU torch wheel: the stand-in
#    for a CUDA + torch image), 2. build Dockerfile.build's stages on it with BASE pointing there.
#
#   sudo bash scripts/buildah-local-base.sh [WORKDIR]     # needs: apt-get install buildah debootstrap
#
# Env: TORCH_WHEEL (a local torch wheel; default: the first torch-*.whl in /opt/wheels),
#      MODEL (qwen3.8-27b) ARCH (9.0) MODE (train), ISOLATION (chroot: works without cgroup v2 delegation).
# On a CPU torch the final stage's gate must FAIL with exit 3 (a slow torch path would run): that is
# the expected outcome here, and proves that the gate blocks the build.
set -euo pipefail
WORK="${1:-/tmp/kernelcheck-buildah}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
ISOLATION="${ISOLATION:-chroot}"
TORCH_WHEEL="${TORCH_WHEEL:-$(ls /opt/wheels/torch-*.whl 2>/dev/null | head -1)}"
BASE_IMAGE=localhost/kernelcheck-base:cpu
mkdir -p "$WORK"
ROOTFS="$WORK/rootfs"

if [ ! -x "$ROOTFS/usr/bin/python3" ]; then
    echo "== debootstrap bookworm (minbase + python3)"
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
        bookworm "$ROOTFS" http://deb.debian.org/debian
fi
if [ ! -x "$ROOTFS/opt/venv/bin/python" ]; then
    echo "== torch and transformers into /opt/venv of the base (as images that keep torch in a venv do)"
    [ -n "$TORCH_WHEEL" ] || { echo "no torch wheel: set TORCH_WHEEL"; exit 2; }
    cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
    # This machine reaches PyPI through a TLS-inspecting proxy: the base trusts what the host trusts.
    cp /etc/ssl/certs/ca-certificates.crt "$ROOTFS/etc/ssl/certs/ca-certificates.crt"
    mkdir -p "$ROOTFS/tmp/wheels" && cp "$TORCH_WHEEL" "$ROOTFS/tmp/wheels/"
    chroot "$ROOTFS" python3 -m venv /opt/venv
    chroot "$ROOTFS" env PIP_CERT=/etc/ssl/certs/ca-certificates.crt /opt/venv/bin/pip install --quiet \
        --disable-pip-version-check \
        "/tmp/wheels/$(basename "$TORCH_WHEEL")" 'transformers==5.24.*'
    rm -rf "$ROOTFS/tmp/wheels"
fi

echo "== import the rootfs as $BASE_IMAGE"
ctr=$(buildah from scratch)
mnt=$(buildah mount "$ctr")
cp -a "$ROOTFS/." "$mnt/"
buildah umount "$ctr" >/dev/null
buildah config --env PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --cmd /bin/bash "$ctr"
buildah commit --quiet "$ctr" "$BASE_IMAGE" >/dev/null
buildah rm "$ctr" >/dev/null

echo "== buildah bud -f Dockerfile.build (BASE=$BASE_IMAGE)"
set +e
buildah bud --isolation "$ISOLATION" --format docker --layers -f "$REPO/Dockerfile.build" \
    --build-arg "BASE=$BASE_IMAGE" --build-arg "MODEL=${MODEL:-qwen3.8-27b}" \
    --build-arg "ARCH=${ARCH:-9.0}" --build-arg "MODE=${MODE:-train}" \
    -t localhost/kernelcheck-gate-test "$REPO" 2>&1 | tee "$WORK/bud.log"
rc=${PIPESTATUS[0]}
set -e
echo "== buildah bud exit: $rc (log: $WORK/bud.log)"
exit "$rc"
