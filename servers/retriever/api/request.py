"""What every request is, and what a face says when the arguments do not make one: `Request`
(unknown keys refused, frozen, no NaN or infinity anywhere), `argument_problems` and
`unreadable_json`. The tools' requests (models.py, search_requests.py) build on it."""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from ..errors import InvalidInputError
from .fields import non_finite


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    @model_validator(mode="after")
    def _finite(self) -> Request:
        return self.check_finite()

    def check_finite(self) -> Request:
        """NaN and infinities (JSON has neither) are refused in every argument, nested ones included (also run on
        a request built from arguments validated by signature: mcp/core.py). Not a ValueError: the frameworks
        that build requests inside a tool's body pass it on as the client's error, not as a bug."""
        for name in type(self).model_fields:
            where = non_finite(getattr(self, name))
            if where is not None:
                raise InvalidInputError(f"invalid arguments: {name}{where[:200]}: NaN and infinite numbers are "
                                        "refused (JSON has none); send a finite number, a string or null")
        return self

    def options(self, *names: str) -> dict[str, Any]:
        return {n: getattr(self, n) for n in names}



def unreadable_json(e: ValueError | RecursionError) -> str:
    """What makes JSON unreadable to Python (a number past its int <-> str limit, nesting past the
    recursion limit), said for the client who sent it."""
    if isinstance(e, RecursionError):
        return "the JSON is nested too deeply"
    if "integer string conversion" in str(e):
        return f"a number has more than {sys.get_int_max_str_digits()} digits"
    return " ".join(str(e).split())


def argument_problems(e: Exception) -> str:
    """`top_k: Input should be greater than or equal to 1 (got 0)` per wrong argument."""
    cause = e if isinstance(e, ValidationError) else e.__cause__
    if not isinstance(cause, ValidationError):
        return " ".join(str(e).split())
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                     + ("" if isinstance(err.get("input"), (dict, list)) else f" (got {err.get('input')!r})")
                     for err in cause.errors())
