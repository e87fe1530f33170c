#!/usr/bin/env bash
# CI's run with nothing of the project cached, as a fresh machine has it: `.ci/run` in a fresh clone
# of this repository's HEAD (committed work only), without pip's cache, with a fresh XDG cache (the
# model's export) and npm cache, a new buildah base image name and a new debootstrap root. Prints the
# clone's folder; the log is <folder>/ci.log (the phase table at its end). Delete the folder after
# (about 5 GB). Run with nothing else on the machine for times that mean something.
set -u
src=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
d=$(mktemp -d /tmp/dry.XXXX)
git clone -q "$src" "$d/repo"
mkdir -p "$d/xdg"
cd "$d/repo"
git log -1 --format='%h %s' | cut -c1-100
echo "dir $d"
CI=true PIP_NO_CACHE_DIR=1 npm_config_cache="$d/npm" XDG_CACHE_HOME="$d/xdg" \
  RETRIEVER_CONTAINER_BASE="localhost/bookworm-python-dry$(date +%s):3.11" RETRIEVER_ROOTFS="$d/rootfs" \
  /usr/bin/time -v bash .ci/run > "$d/ci.log" 2>&1
echo "rc $?" >> "$d/ci.log"
tail -1 "$d/ci.log"
