"""A small MCP server for the pipeline tests, run over stdio: a router and a counter."""

from fastmcp import FastMCP

mcp = FastMCP("router")
calls = {"n": 0}


@mcp.tool
def route(q_ls: list[str]) -> dict:
    """state: 'many' for more than one query, else 'one'."""
    return {"state": "many" if len(q_ls) > 1 else "one"}


@mcp.tool
def route_items(q_ls: list[str]) -> dict:
    """UltraRAG's router shape: each query with its state, 'short' (3 words or fewer) or 'long'."""
    return {"q_ls": [{"data": q, "state": "short" if len(q.split()) <= 3 else "long"} for q in q_ls]}


@mcp.tool
def count(label: str = "x") -> dict:
    """How many times this server's count was called."""
    calls["n"] += 1
    return {"counted": calls["n"], "label": label}


@mcp.tool
def places(where: str) -> dict:
    """A reply naming paths (another server's data, which a pipeline may pass to our tools)."""
    return {"parse_file_path": where, "image_corpus_save_path": f"{where}/images.jsonl"}


if __name__ == "__main__":
    mcp.run("stdio", show_banner=False)
