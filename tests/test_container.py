"""The Dockerfile builds and runs: scripts/container.sh builds the image with buildah (chroot
isolation, a debootstrap base), then the image's own `retriever deploy` answers /readyz and a
token-protected /search, as its non-root user, on an exported runtime with no torch in the image.
The build takes minutes, so this runs as its own CI step (.ci/run installs buildah and debootstrap,
then runs it with RETRIEVER_CONTAINER_TEST=1); `make test` leaves it out."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from retriever.testing.net import free_port, wait_http

ROOT = Path(__file__).resolve().parents[1]
TAG = "localhost/mcp-retriever:test"
TOKEN = "container-token-5d1e"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("RETRIEVER_CONTAINER_TEST") != "1",
                       reason="its own CI step (.ci/run): RETRIEVER_CONTAINER_TEST=1 pytest tests/test_container.py"),
    pytest.mark.skipif(shutil.which("buildah") is None or os.geteuid() != 0,
                       reason="needs Debian's buildah, run as root (apt-get install buildah debootstrap)"),
]
# In the image: which runtime serves, whether torch could even be imported, and whether OpenVINO may send
# its usage telemetry.
PROBE = ("import importlib.util, json, sys; from retriever.config import load_config; "
         "from retriever.embedders import build_embedder; e = build_embedder(load_config('/app/parameter.yaml')); "
         "print(json.dumps({'runtime': e.runtime, 'reason': e.runtime_reason, "
         "'torch': importlib.util.find_spec('torch') is not None, 'imported': 'torch' in sys.modules, "
         "'telemetry': __import__('openvino_telemetry.utils.opt_in_checker').utils.opt_in_checker.OptInChecker()"
         ".check(False, False).name}))")


BASE = os.environ.get("RETRIEVER_CONTAINER_BASE", "localhost/bookworm-python:3.11")  # scripts/container.sh's


def _images(*names: str) -> set[str]:
    """The ids of the images `names` name (one not there: none), or of every image, intermediate
    ones too, without names: that listing must succeed, or the clean-up would take images it
    never made for its own."""
    listed = subprocess.run(["buildah", "images", "-q", "--no-trunc", *(names or ["-a"])], capture_output=True,
                            text=True, check=not names)
    return set(listed.stdout.split())


def test_image_builds_and_serves(tmp_path: Path) -> None:
    before = _images()
    try:
        build_and_serve(tmp_path, before)
    finally:  # what this run made, its image and anything a build left behind, passed or failed: 0.6 to 3 GB each
        for _ in range(3):  # an image other images were made from goes once they have
            left = _images() - before - _images(BASE)
            if not left:
                break
            for image in left:
                subprocess.run(["buildah", "rmi", image], capture_output=True, check=False)  # not -f: one in use stays


def build_and_serve(tmp_path: Path, before: set[str]) -> None:
    built = subprocess.run([str(ROOT / "scripts" / "container.sh"), TAG], capture_output=True, text=True,
                           timeout=1800, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    # a build leaves its image and nothing else (with --layers each build left its 2.2 GB build stage behind);
    # the base image, where this build made it, is kept
    assert _images() - before - _images(BASE) == _images(TAG), "the build left images behind"
    print("image:", built.stdout.strip())  # name and size, for the record
    number, unit = built.stdout.split()[-2:]  # buildah's size: decimal units (go-units' HumanSize)
    size_mb = float(number) * {"B": 1e-6, "kB": 1e-3, "MB": 1.0, "GB": 1e3}[unit]
    assert size_mb <= 600, f"the image is {number} {unit}; the goal is at most 600 MB"
    ctr = subprocess.run(["buildah", "from", "-q", TAG], capture_output=True, text=True, check=True).stdout.strip()
    port = free_port()
    log = (tmp_path / "container.log").open("w+")
    # chroot isolation shares the host's network: bind loopback only (the image's default is 0.0.0.0)
    proc = subprocess.Popen(["buildah", "run", "--isolation", "chroot", "-e", f"RETRIEVER_HTTP_TOKENS={TOKEN}", ctr,
                             "--", "retriever", "deploy", "--config", "/app/parameter.yaml", "--host", "127.0.0.1",
                             "--port", str(port)], stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/readyz", proc, lambda: log.seek(0) or log.read()[-3000:])
        search = {"query_list": ["what is BM25?"], "top_k": 1}
        assert httpx.post(f"{url}/search", json=search).status_code == 401
        r = httpx.post(f"{url}/search", json=search, headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200 and r.json()["ret_ids"] == [["doc15"]]
        user = subprocess.run(["buildah", "run", "--isolation", "chroot", ctr, "--", "id", "-u"], capture_output=True,
                              text=True, check=True).stdout.strip()
        assert user != "0"
        probe = subprocess.run(["buildah", "run", "--isolation", "chroot", ctr, "--", "python3", "-c", PROBE],
                               capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        print("image runtime:", probe)
        info = json.loads(probe)
        assert info["runtime"].startswith("openvino ") and info["reason"].startswith("torch is not installed")
        assert not info["torch"] and not info["imported"]
        assert info["telemetry"] == "DECLINED"  # OpenVINO's usage events: the image's user declined them
    finally:
        with contextlib.suppress(ProcessLookupError):  # it may have exited already: the assert above says why
            os.killpg(proc.pid, 15)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(30)
        subprocess.run(["buildah", "rm", ctr], capture_output=True, check=False)
    log.seek(0)
    assert TOKEN not in log.read()
