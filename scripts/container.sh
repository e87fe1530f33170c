#!/usr/bin/env bash
# Build the service image on a machine without registry access (this one): Debian's buildah with
# chroot isolation, a base made locally with debootstrap (bookworm: Python 3.11), pip reaching
# PyPI through the host's CA bundle, and the CPU torch wheel from the host's find-links folder.
# Elsewhere, `docker build -t mcp-retriever .` does the same from python:3.11-slim.
#   scripts/container.sh [TAG]        (default TAG: localhost/mcp-retriever:latest)
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:-localhost/mcp-retriever:latest}
BASE=${RETRIEVER_CONTAINER_BASE:-localhost/bookworm-python:3.11}
ROOTFS=${RETRIEVER_ROOTFS:-/var/tmp/rootfs/bookworm}
CA=$(pip config get global.cert 2>/dev/null || echo /etc/ssl/certs/ca-certificates.crt)
WHEELS=$(pip config get global.find-links 2>/dev/null || true)

if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  echo "making the base image $BASE with debootstrap (a few minutes)" >&2
  if [ ! -x "$ROOTFS/usr/bin/python3" ]; then
    debootstrap --variant=minbase --include=python3,python3-venv,python3-pip bookworm "$ROOTFS" \
      http://deb.debian.org/debian >&2
  fi
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$ROOTFS/." "$mnt/"
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  buildah commit -q "$ctr" "$BASE" >/dev/null
  buildah rm "$ctr" >/dev/null
fi

args=(--isolation chroot --layers -q -t "$TAG" --build-arg "BASE=$BASE")
args+=(-v "$CA:/etc/ssl/certs/host-ca.crt:ro" --build-arg PIP_CERT=/etc/ssl/certs/host-ca.crt)
if [ -n "$WHEELS" ] && [ -d "$WHEELS" ]; then  # the CPU torch wheel lies here
  args+=(-v "$WHEELS:/wheels:ro" --build-arg "TORCH_PIP_ARGS=--find-links /wheels")
fi
buildah bud "${args[@]}" . >&2
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$TAG"
