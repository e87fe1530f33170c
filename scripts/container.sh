#!/usr/bin/env bash
# Build the service image on a machine without registry access (this one): Debian's buildah with
# chroot isolation, a base made locally with debootstrap (bookworm: Python 3.11) from the Debian
# mirror apt already uses, pip reaching its index through the host's CA bundle, and the CPU torch
# wheel from the host's find-links folder (pip config), mounted into the build stage.
# Elsewhere, `docker build -t mcp-retriever .` does the same from python:3.11-slim.
#   scripts/container.sh [TAG]        (default TAG: localhost/mcp-retriever:latest)
# Prints the image's name and size; `apt-get install buildah debootstrap` first (.ci/run does).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:-localhost/mcp-retriever:latest}
BASE=${RETRIEVER_CONTAINER_BASE:-localhost/bookworm-python:3.11}
ROOTFS=${RETRIEVER_ROOTFS:-/var/tmp/rootfs/bookworm}
CA=$(pip config get global.cert 2>/dev/null || echo /etc/ssl/certs/ca-certificates.crt)
WHEELS=${PIP_FIND_LINKS:-$(pip config get global.find-links 2>/dev/null || true)}

mirror() {  # the Debian mirror of this machine's apt sources (deb822 or one-line format)
  local m
  m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -E '/debian/?$' | head -1 || true)
  [ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}' \
                     | grep -E '/debian/?$' | head -1 || true)
  [ -n "$m" ] || { echo "no Debian mirror in /etc/apt/sources*; set RETRIEVER_DEBIAN_MIRROR" >&2; exit 1; }
  echo "$m"
}

if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  echo "making the base image $BASE with debootstrap (a few minutes)" >&2
  if [ ! -x "$ROOTFS/usr/bin/python3" ]; then
    debootstrap --variant=minbase --include=python3,python3-venv bookworm "$ROOTFS" \
      "${RETRIEVER_DEBIAN_MIRROR:-$(mirror)}" >&2
  fi
  ctr=$(buildah from scratch)
  mnt=$(buildah mount "$ctr")
  cp -a "$ROOTFS/." "$mnt/"
  # what neither stage uses (both install with pip, never apt): package caches, apt and perl, docs,
  # translations, time zones, iconv modules (Python has its own codecs)
  rm -rf "$mnt"/var/cache/apt/archives/*.deb "$mnt"/var/lib/apt/lists/* "$mnt"/usr/share/doc/* "$mnt"/usr/share/man/* \
         "$mnt"/usr/share/locale/* "$mnt"/usr/lib/x86_64-linux-gnu/gconv "$mnt"/usr/share/zoneinfo "$mnt"/usr/share/info \
         "$mnt"/usr/bin/perl* "$mnt"/usr/lib/x86_64-linux-gnu/perl* "$mnt"/usr/share/perl* \
         "$mnt"/usr/bin/apt* "$mnt"/usr/lib/apt "$mnt"/usr/lib/x86_64-linux-gnu/libapt*
  buildah umount "$ctr" >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$ctr"
  buildah commit -q "$ctr" "$BASE" >/dev/null
  buildah rm "$ctr" >/dev/null
fi

# No --layers: each step cached as an image left the 2 GB build stage behind at every build. What it
# saved was the torch install (the first step; every step after the source copy misses the cache on
# a new commit anyway): now redone each build, from the local wheel. The image that held TAG before
# is removed once the new one has it, so repeated builds do not fill the disk.
previous=$(buildah images -q --no-trunc "$TAG" 2>/dev/null || true)
args=(--isolation chroot -q -t "$TAG" --build-arg "BASE=$BASE")
args+=(-v "$CA:/etc/ssl/certs/host-ca.crt:ro" --build-arg PIP_CERT=/etc/ssl/certs/host-ca.crt)
if [ -n "$WHEELS" ] && [ -d "$WHEELS" ]; then  # the CPU torch wheel lies here
  args+=(-v "$WHEELS:/wheels:ro" --build-arg "TORCH_PIP_ARGS=--find-links /wheels")
fi
buildah bud "${args[@]}" . >&2
if [ -n "$previous" ] && [ "$previous" != "$(buildah images -q --no-trunc "$TAG")" ]; then
  buildah rmi "$previous" >/dev/null 2>&1 || echo "the previous $TAG ($previous) could not be removed (in use, or named elsewhere); kept" >&2
fi
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$TAG"
