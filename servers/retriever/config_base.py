"""What parameter.yaml's sections share: paths resolved against the YAML's folder, a section
written empty taking its defaults, and the model every section is (unknown keys are errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo


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
