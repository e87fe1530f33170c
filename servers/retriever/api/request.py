"""What every request is, and what a face says when the arguments do not make one: `Request`
(unknown keys refused, frozen, no NaN or infinity anywhere), `argument_problems` and
`unreadable_json`. The tools' requests (models.py, search_requests.py) build on it."""

from __future__ import annotations

import sys
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import PydanticUndefined

from ..errors import InvalidInputError
from .fields import non_finite

_PLAIN = frozenset({str, int, bool, type(None)})


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    @model_validator(mode="after")
    def _finite(self) -> Request:
        return self.check_finite()

    def check_finite(self) -> Request:
        """NaN and infinities (JSON has neither) are refused in every argument, nested ones included (also run on
        a request built from arguments validated by signature: mcp/core.py). Not a ValueError: the frameworks
        that build requests inside a tool's body pass it on as the client's error, not as a bug."""
        values = self.__dict__
        for name in type(self).model_fields:
            value = values[name]
            if type(value) in _PLAIN:  # most arguments: nothing to look into
                continue
            where = non_finite(value)
            if where is not None:
                raise InvalidInputError(f"invalid arguments: {name}{where[:200]}: NaN and infinite numbers are "
                                        "refused (JSON has none); send a finite number, a string or null")
        return self

    @classmethod
    def built(cls, **values: Any) -> Self:
        """`cls.model_construct(**values)`: the request from values validated already, the same object
        (fields, fields set, no extra, no private), in a third of its time: the defaults of the fields
        not given come from one copy per class of those that are constants (tests/test_lean_paths.py
        compares the two for every request). A class whose defaults are not all constants is built by
        model_construct. Two are built per agent search (mcp/core.py tool_function, agent.py as_kind)."""
        template = _TEMPLATES.get(cls)
        if template is None:
            template = _TEMPLATES[cls] = _template(cls)
        if template is False:
            return cls.model_construct(**values)  # type: ignore[return-value]
        fields, required = template
        data = dict(fields)
        given = set()
        for name, value in values.items():
            if name in data:
                data[name] = value
                given.add(name)
        if not given >= required:  # model_construct leaves a required field not given unset
            for name in required - given:
                del data[name]
        m = cls.__new__(cls)
        object.__setattr__(m, "__dict__", data)
        object.__setattr__(m, "__pydantic_fields_set__", given)
        object.__setattr__(m, "__pydantic_extra__", None)
        object.__setattr__(m, "__pydantic_private__", None)
        return m

    def options(self, *names: str) -> dict[str, Any]:
        return {n: getattr(self, n) for n in names}

    def given(self, name: str, default: Any = None) -> Any:
        """The field `name`'s value, or `default` where this kind of request has no such field: what
        `getattr(request, name, default)` gives, without pydantic's `__getattr__` and the exception a
        missing name costs there (a few per call, on every call's path: mcp/core.py, grants.py)."""
        return self.__dict__.get(name, default)



_CONSTANT = (str, int, float, bool, bytes, tuple, frozenset, type(None))
_TEMPLATES: dict[type, Any] = {}  # a request class -> (its fields in order with their defaults, the required), or False


def _template(cls: type[Request]) -> Any:
    """What Request.built copies for `cls`: each field in order with its default (None for a required
    one, which is given or removed), and the required; False where built cannot stand for
    model_construct (a default factory or a mutable default, an alias, extra allowed, private state)."""
    if cls.model_config.get("extra") == "allow" or cls.__pydantic_post_init__ or cls.__private_attributes__:
        return False
    fields: dict[str, Any] = {}
    required = set()
    for name, f in cls.model_fields.items():
        if f.validation_alias is not None or f.alias is not None or f.default_factory is not None:
            return False
        if f.is_required():
            required.add(name)
            fields[name] = None
        elif f.default is PydanticUndefined or not isinstance(f.default, _CONSTANT):
            return False
        else:
            fields[name] = f.default
    return fields, frozenset(required)


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
