"""The tools of an MCP server as reactchat ``Tool``s."""

from __future__ import annotations

import base64
import binascii
import logging
import uuid
from typing import TYPE_CHECKING, Any

from reactchat.messages import ImagePart
from reactchat.messages.images import ImageRejected, Observation, checked
from reactchat.store._artifacts import safe_name
from reactchat.tools import Effect, Tool, ToolInputError
from reactchat.tools._schema import Check, SchemaTool, json_schema_check

if TYPE_CHECKING:
    from reactchat.mcp._client import MCPServer

log = logging.getLogger("reactchat.mcp")

#: nesting of objects and arrays an input schema may have; deeper ones are left out (real
#: schemas nest a few levels and share the rest through ``$defs``; validating and showing a
#: deeper one recurses towards Python's limit)
MAX_SCHEMA_DEPTH = 64


class MCPToolError(Exception):
    """The MCP tool reported an error (its text is the observation)."""


def listed_tools(server: MCPServer, listing: list[Any]) -> list[Tool]:
    """``Tool``s for the tools an MCP server listed; one whose input schema is not valid
    JSON Schema or nests deeper than ``MAX_SCHEMA_DEPTH``, or whose name came before, is
    left out with a warning in the log, and the others still work."""
    tools: list[Tool] = []
    names: set[str] = set()
    for spec in listing:
        schema = dict(spec.input_schema or {"type": "object"})
        check = _checker(spec.name, schema, names)
        if isinstance(check, str):
            log.warning("MCP server %s: tool %r is left out, %s", server.name, spec.name, check)
            continue
        names.add(spec.name)
        description = spec.description or spec.title or spec.name
        tools.append(_tool(server, spec.name, description, schema, check, effect_of(spec.annotations)))
    return tools


def _checker(name: str, schema: dict[str, Any], names: set[str]) -> Check | str:
    """The validator of a listed tool's arguments, or why the tool cannot be offered."""
    # jsonschema comes with the mcp extra, which a listing needs anyway
    from jsonschema import SchemaError

    if name in names:  # which of the two the model meant could not be told
        return "its name is listed twice"
    if _deeper(schema, MAX_SCHEMA_DEPTH):
        return f"its input schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
    try:
        return json_schema_check(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the root"
        return f"its input schema is invalid ({exc.message} at {where})"
    except Exception as exc:  # a schema the validator cannot even build (a bad $schema, a bad pattern)
        return f"its input schema cannot be checked ({type(exc).__name__}: {exc})"


def _deeper(value: Any, limit: int) -> bool:
    """Whether objects and arrays nest in ``value`` more than ``limit`` levels (no recursion)."""
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        todo.extend((child, depth + 1) for child in children)
    return False


class MCPTool(SchemaTool):
    """A tool of an MCP server: its schema as listed, its calls sent to the server."""

    def check(self, arguments: Any) -> dict[str, Any]:
        """Validate against the listed schema; a schema that cannot be resolved (a ``$ref``
        that leads back to itself, one that names nothing) is an error for the model."""
        try:
            return super().check(arguments)
        except ToolInputError:
            raise
        except Exception as exc:  # RecursionError from a $ref loop, referencing's Unresolvable, ...
            raise ToolInputError(
                f"{self.name} cannot be called: its input schema cannot be resolved ({type(exc).__name__}: "
                f"{str(exc)[:200]}). Use another tool."
            ) from None


def result_images(prefix: str, blocks: list[Any]) -> tuple[tuple[ImagePart, ...], list[str]]:
    """The image content of a tool result as images (named ``PREFIX-N-ID.EXT``: a name of
    their own among the session's files), and a line for each one refused."""
    images, refused = [], []
    tag = uuid.uuid4().hex[:8]
    for number, block in enumerate(blocks, 1):
        extension = _EXTENSIONS.get(getattr(block, "mime_type", ""), "img")
        name = safe_name(f"{prefix}-{number}-{tag}.{extension}")
        try:
            data = base64.b64decode(getattr(block, "data", ""), validate=True)
            images.append(checked(name, data))
        except (binascii.Error, ImageRejected) as exc:
            refused.append(f"[{exc if isinstance(exc, ImageRejected) else f'image {name!r} refused: not base64'}]")
    return tuple(images), refused


_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp"}


def effect_of(annotations: Any) -> Effect:
    """A listed tool's effect class from the server's hints: ``readOnlyHint`` means ``read``,
    ``idempotentHint`` ``idempotent``; without either (hints are the server's word, and the
    default is the safe reading) ``unsafe``."""
    if annotations is None:
        return "unsafe"
    if getattr(annotations, "read_only_hint", None):
        return "read"
    if getattr(annotations, "idempotent_hint", None):
        return "idempotent"
    return "unsafe"


def _tool(
    server: MCPServer, name: str, description: str, schema: dict[str, Any], check: Check, effect: Effect
) -> SchemaTool:
    async def call(arguments: dict[str, Any]) -> str | Observation:
        text, is_error, blocks = await server.called(name, arguments)
        if is_error:
            raise MCPToolError(text)
        if not blocks:
            return text
        images, refused = result_images(f"{server.name}-{name}", blocks)
        return Observation("\n".join([text, *refused]), images)

    schema.pop("title", None)
    # MCPServer.call applies the server's timeout and restarts a hung server itself
    return MCPTool(
        call, name=name, description=description, input_schema=schema, check=check, timeout=None, effect=effect
    )
