"""The frameworks' own retriever types over this retriever: a face beside mcp/, service/, pipeline/
and the CLI (none imports another).

- `retriever.integrations.llamaindex.Retriever`: a LlamaIndex `BaseRetriever` (sync and async)
  returning `NodeWithScore`s (`pip install 'mcp-retriever[llamaindex]'`);
- `retriever.integrations.haystack.Retriever`: a Haystack `@component`, `run(query, top_k,
  filters) -> {"documents": [...]}`, saved in and loaded from a pipeline's YAML
  (`pip install 'mcp-retriever[haystack]'`);
- `retriever.integrations.langchain.Retriever`: a LangChain `BaseRetriever` returning `Document`s
  (`pip install 'mcp-retriever[langchain]'`).

Each is made with `from_yaml(path, **options)` (this library in process, from a parameter.yaml),
`from_url(url, token=...)` (a running `retriever deploy` service) or `from_mcp(url, token=...)` (a
running MCP server's agent `search` tool, by the official MCP SDK's client over streamable HTTP,
one session kept open for every call). They search as the MCP
agent's `search` does (mode hybrid by default, scores 0..1) and carry each hit's id, text, score,
metadata and, for a file's chunk, its citation (`source`: document, path, page, heading, ...).
Filters come in each framework's own syntax and are translated (translate.py); what has no
meaning here is refused with an error that says what does.

Nothing is imported here: each module imports its framework, and core.py only what it uses.
"""
