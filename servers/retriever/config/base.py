"""What parameter.yaml's sections share: paths resolved against the YAML's folder, a section
written empty taking its defaults, and the model every section is (unknown keys are errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, PrivateAttr, ValidationInfo


def _resolve(value: Path, info: ValidationInfo) -> Path:
    base = (info.context or {}).get("base_dir")
    if base is not None and not value.is_absolute():
        value = Path(base) / value
    return value


ResolvedPath = Annotated[Path, AfterValidator(_resolve)]


def none_as_empty(value: Any) -> Any:
    """A section written as `key:` with nothing under it (YAML null) takes its defaults."""
    return {} if value is None else value


class Section(BaseModel):
    """One section of parameter.yaml: unknown keys are errors."""

    # allow_inf_nan=False: NaN or infinity in any float (YAML or tool argument) is an error
    model_config = ConfigDict(extra="forbid", validate_default=True, allow_inf_nan=False)
    # Set by the guard (guard.py confine_keys) on a section whose URL a tool call gave: its key
    # may then come from that call only, never from the YAML or the environment. Not a YAML key.
    _url_from_call: bool = PrivateAttr(default=False)

    @property
    def url_from_call(self) -> bool:
        return self._url_from_call

    def with_url_from_call(self, **update: Any) -> Self:
        """A copy (with `update`) marked as holding a URL a tool call gave."""
        copy = self.model_copy(update=update)
        copy._url_from_call = True
        return copy
