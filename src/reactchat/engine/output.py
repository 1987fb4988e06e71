"""Typed final answers: ``Agent(output_type=SomePydanticModel)`` or a JSON schema.

The final answer must be JSON that validates; one that does not goes back to the model
as a correction naming what is wrong (a bounded number of times), and ``result.output``
is the validated value: an instance of the pydantic model, or the parsed JSON for a
schema. The stored answer text is the validated JSON, so the value can be rebuilt from
the session's events in any process.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from reactchat.errors import ReactchatError

#: corrections a turn may send for answers that do not validate, before it stops
DEFAULT_RETRIES = 2
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(.*?)\n\s*```\s*$", re.S)


class OutputInvalid(ReactchatError, ValueError):
    """A final answer does not validate; ``str(error)`` is the correction for the model."""


class Output:
    """What a typed final answer must be (``output_type``: a pydantic model class, another
    type pydantic can validate, or a JSON schema as a dict)."""

    def __init__(self, output_type: Any, retries: int = DEFAULT_RETRIES) -> None:
        if retries < 0:
            raise ValueError("output retries must be 0 or more")
        self.retries = retries
        self.output_type = output_type
        if isinstance(output_type, dict):
            self.schema: dict[str, Any] = output_type
            self.name = str(output_type.get("title") or "answer")
            self._adapter: TypeAdapter[Any] | None = None
            self._validator = _json_schema_validator(output_type)
        else:
            self._adapter = TypeAdapter(output_type)
            self.schema = self._adapter.json_schema()
            self.name = getattr(output_type, "__name__", "answer")
            self._validator = None

    def instructions(self) -> str:
        """What the prompt tells the model about its final answer."""
        return (
            "Your final answer must be a single JSON value, and nothing else, that matches this JSON schema: "
            + json.dumps(self.schema, ensure_ascii=False, separators=(",", ":"))
        )

    def validate(self, answer: str) -> Any:
        """The validated value of a final answer; ``OutputInvalid`` says what to fix."""
        text = _unfenced(answer)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise OutputInvalid(
                f"Your final answer is not valid JSON ({error.msg} at character {error.pos}). "
                f"Answer again with only a JSON value that matches the {self.name} schema."
            ) from None
        if self._adapter is not None:
            try:
                return self._adapter.validate_python(data)
            except ValidationError as error:
                raise OutputInvalid(_correction(self.name, _pydantic_problems(error))) from None
        assert self._validator is not None
        problems = [
            f"{'.'.join(str(p) for p in e.absolute_path) or '(top level)'}: {e.message}"
            for e in self._validator.iter_errors(data)
        ]
        if problems:
            raise OutputInvalid(_correction(self.name, problems[:10]))
        return data

    def dump(self, value: Any) -> str:
        """The stored answer text of a validated value (compact JSON)."""
        if self._adapter is not None:
            return self._adapter.dump_json(value).decode()
        return json.dumps(value, ensure_ascii=False)


def _unfenced(answer: str) -> str:
    """The answer without a Markdown code fence around it (models add them)."""
    fenced = _FENCE.match(answer)
    return fenced.group(1) if fenced else answer.strip()


def _pydantic_problems(error: ValidationError) -> list[str]:
    return [f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {e['msg']}" for e in error.errors()[:10]]


def _correction(name: str, problems: list[str]) -> str:
    listed = "; ".join(problems)
    return f"Your final answer does not match the {name} schema: {listed}. Answer again with corrected JSON only."


def _json_schema_validator(schema: dict[str, Any]) -> Any:
    try:
        # optional: jsonschema, only for an output_type given as a JSON schema
        import jsonschema  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError as exc:
        raise ImportError(
            "output_type given as a JSON schema needs the jsonschema package: pip install jsonschema "
            "(or pass a pydantic model class)"
        ) from exc
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    return validator_class(schema)


def as_output(output_type: Any, retries: int = DEFAULT_RETRIES) -> Output | None:
    """An ``Output`` for an ``output_type`` (None stays None: a plain-text answer)."""
    if output_type is None or isinstance(output_type, Output):
        return output_type
    return Output(output_type, retries)
