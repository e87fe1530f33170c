"""Helpers the tests and the benches share (they need the test extra: pip install -e '.[test]').

- projects.py: the checkout's paths, a project folder with its parameter.yaml, an engine over it;
- folders.py, images.py: real documents in their formats, a tiny CLIP model and pictures;
- net.py: a free local port, waiting until a server process answers;
- embedding_servers.py, json_server.py, fake_llm.py, fake_web.py: local servers speaking the wire
  formats of an embedding API, a JSON service, OpenAI's chat completions and the web search APIs;
- milvus_server.py: a real Milvus 2.3.5 server, started and stopped by the run;
- oidc.py (with oidc_provider.mjs): a real OpenID Connect provider on 127.0.0.1.

Imported by tests/ and bench/ by name (`from retriever.testing.fake_web import FakeProvider`), never
by the product's own modules.
"""
