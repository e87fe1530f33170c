"""The Dockerfile builds and runs: scripts/container.sh builds the image with buildah (chroot
isolation, a debootstrap base), then the image's own `retriever deploy` answers /readyz and a
token-protected /search, as its non-root user. Skipped where buildah is not installed (a fresh
CI machine); `make test` runs it here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from embedding_servers import free_port, wait_http

ROOT = Path(__file__).resolve().parents[1]
TAG = "localhost/mcp-retriever:test"
TOKEN = "container-token-5d1e"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("buildah") is None or os.geteuid() != 0,
                       reason="needs Debian's buildah, run as root (apt-get install buildah debootstrap)"),
]


def test_image_builds_and_serves(tmp_path: Path) -> None:
    built = subprocess.run([str(ROOT / "scripts" / "container.sh"), TAG], capture_output=True, text=True,
                           timeout=1800, check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    print("image:", built.stdout.strip())  # name and size, for the record
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
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)
        subprocess.run(["buildah", "rm", ctr], capture_output=True, check=False)
    log.seek(0)
    assert TOKEN not in log.read()
