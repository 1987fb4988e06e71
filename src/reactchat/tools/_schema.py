"""Tools described by a JSON schema rather than a Python signature (MCP servers, LangChain).

``SchemaTool`` is a ``Tool`` whose model-facing schema is given, whose arguments are
checked by a validator of the caller's choice, and whose call receives the arguments as
one dict. ``json_schema_check`` validates against the schema itself (``jsonschema``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from reactchat.tools._tool import Tool, ToolInputError

Check = Callable[[Any], dict[str, Any]]


class SchemaTool(Tool):
    """A tool with a given input schema; ``call(arguments)`` does the work."""

    def __init__(
        self,
        call: Callable[[dict[str, Any]], Awaitable[Any]],
        *,
        name: str,
        description: str,
        input_schema: dict[str, Any],
        check: Check,
        **options: Any,
    ) -> None:
        async def placeholder() -> None:
            """Replaced below: the signature-based machinery describes no parameters."""

        super().__init__(placeholder, name=name, description=description, **options)

        async def invoke(**arguments: Any) -> Any:
            return await call(arguments)

        self.fn = invoke
        self.input_schema = input_schema
        self.params = list(input_schema.get("properties") or {})
        self._check = check

    def check(self, arguments: Any) -> dict[str, Any]:
        """Validate with the tool's own validator; its error message is shown to the model."""
        try:
            return self._check(arguments)
        except ToolInputError as exc:
            raise ToolInputError(f"Invalid arguments for {self.name}: {exc}. Schema: {self.schema_json()}") from None


def json_schema_check(schema: dict[str, Any]) -> Check:
    """A validator for ``schema`` (any JSON Schema draft it declares; 2020-12 by default).

    Raises ``jsonschema.SchemaError`` at once if the schema itself is invalid.
    """
    try:
        # optional: jsonschema, for tools described by a JSON schema (the [mcp] extra installs it)
        from jsonschema import validators
    except ImportError:
        raise ImportError("tools described by a JSON schema need jsonschema: pip install jsonschema") from None

    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    cls.check_schema(schema)
    validator = cls(schema)

    def check(arguments: Any) -> dict[str, Any]:
        if not isinstance(arguments, dict):
            raise ToolInputError(f"expected a JSON object, got {json.dumps(arguments)[:80]}")
        problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if problems:
            raise ToolInputError(
                "; ".join(f"{'.'.join(str(p) for p in e.absolute_path) or 'input'}: {e.message}" for e in problems)
            )
        return arguments

    return check
