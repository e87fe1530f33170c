# mcp-retriever: CPU image serving MCP over streamable HTTP on port 8000.
#   docker build -t mcp-retriever .
#   docker run -p 8000:8000 -v $PWD/index:/app/index mcp-retriever
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
COPY pyproject.toml README.md ./
COPY servers ./servers
RUN pip install --no-cache-dir '.[zh]'
COPY parameter.yaml ./
COPY data ./data
EXPOSE 8000
CMD ["retriever", "serve", "--transport", "http", "--host", "0.0.0.0", "--port", "8000", "--config", "/app/parameter.yaml"]
