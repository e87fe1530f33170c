# mcp-retriever: the deployed search service (`retriever deploy`) on CPU, as a non-root user.
#   docker build -t mcp-retriever .
#   docker run -p 64501:64501 -e RETRIEVER_HTTP_TOKENS=<token> -v $PWD/index:/app/index mcp-retriever
# Off loopback the service refuses to start without a token. The image holds the sample corpus's
# indexes; mount your own index folder (and parameter.yaml) for a real corpus. `--mcp` as an extra
# argument also serves the MCP tools at /mcp. Building without registry access: see README, Deploy.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
# the CPU build of torch (PyPI's default torch pulls gigabytes of CUDA libraries)
ARG TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
# a CA bundle for pip, where the package index is reached through a proxy (scripts/container.sh)
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
RUN python3 -m venv /opt/venv
RUN /opt/venv/bin/pip install ${TORCH_PIP_ARGS} torch==2.13.0
COPY pyproject.toml README.md /src/
COPY servers /src/servers
RUN /opt/venv/bin/pip install /src \
 && find /opt/venv -name __pycache__ -prune -exec rm -rf {} + \
 && rm -rf /opt/venv/lib/python3.11/site-packages/torch/include /opt/venv/lib/python3.11/site-packages/torch/test
WORKDIR /app
COPY parameter.yaml ./
COPY data/sample_corpus.jsonl ./data/
RUN /opt/venv/bin/retriever index --config parameter.yaml > /dev/null

FROM ${BASE}
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
RUN useradd --no-log-init --uid 10001 --home-dir /app --shell /usr/sbin/nologin retriever
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=retriever:retriever /app /app
WORKDIR /app
USER retriever
EXPOSE 64501
ENTRYPOINT ["retriever", "deploy", "--config", "/app/parameter.yaml", "--host", "0.0.0.0", "--port", "64501"]
