"""The service's OpenAPI 3.1 description, made from the same request models the routes validate
with, so it cannot drift from them."""

from __future__ import annotations

from typing import Any

from ..api.models import DeploySearchRequest, Request

REPLY = {
    "type": "object",
    "description": "One list per query, best first: ret_psg (passages, UltraRAG's key), ret_ids, ret_scores; "
    "ret_meta with return_metadata; ret_sources for hybrid; truncated when a reply budget cut it.",
    "properties": {key: {"type": "array", "items": {"type": "array"}} for key in
                   ("ret_psg", "ret_ids", "ret_scores", "ret_meta")},
}
ERROR = {"type": "object", "properties": {"error": {"type": "string"}}}
ERRORS = {
    "401": "a valid bearer token is required", "403": "Host, Origin or a setting not allowed",
    "413": "over a limit", "422": "invalid arguments", "503": "not ready, or the queue is full (Retry-After)",
    "504": "no reply within deploy.request_timeout",
}


def _post(summary: str, model: type[Request]) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": "the hits",
                                         "content": {"application/json": {"schema": REPLY}}}}
    responses |= {code: {"description": text, "content": {"application/json": {"schema": ERROR}}}
                  for code, text in ERRORS.items()}
    return {"post": {"summary": summary, "security": [{"bearer": []}],
                     "requestBody": {"required": True,
                                     "content": {"application/json": {"schema": model.model_json_schema()}}},
                     "responses": responses}}


def _get(summary: str, media: str = "application/json") -> dict[str, Any]:
    return {"get": {"summary": summary, "responses": {"200": {"description": summary, "content": {media: {}}}}}}


def openapi(tools: list[tuple[str, type[Request]]]) -> dict[str, Any]:
    paths = {"/search": _post("Search (UltraRAG's deploy API, plus mode, filters, ids, scores, metadata)",
                              DeploySearchRequest)}
    paths |= {f"/tools/{name}": _post(f"The MCP tool {name}: same arguments, same reply", model)
              for name, model in tools}
    paths |= {"/healthz": _get("The process answers"), "/readyz": _get("The indexes are loaded (503 until then)"),
              "/metrics": _get("Prometheus metrics", "text/plain")}
    return {"openapi": "3.1.0", "info": {"title": "mcp-retriever deploy", "version": "1"}, "paths": paths,
            "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}}
