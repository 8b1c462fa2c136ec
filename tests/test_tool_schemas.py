"""Every tool schema the project registers is valid for tool-calling providers.

A schema passes when it is valid JSON Schema draft 2020-12 (``check_schema``) and keeps to the
restrictions Anthropic (and Bedrock) put on a tool's ``input_schema``, the strictest provider
we target:

1. the root is an object schema: ``"type": "object"``;
2. the root has no ``$schema`` (or ``$id``) keyword;
3. the root has no composition or value keyword: ``oneOf``, ``anyOf``, ``allOf``, ``not``,
   ``enum``, ``const``, ``if``/``then``/``else``;
4. no subschema uses ``prefixItems`` (tuple schemas, which a zero-length tuple emits), an
   array-form ``items`` (draft-4 tuples) or ``items: false``;
5. every ``$ref`` is local (``#/...``) and resolves;
6. every ``required`` name is declared in the same schema's ``properties``;
7. the schema is plain JSON (it survives a ``json`` round trip unchanged);
8. the tool's name matches ``^[a-zA-Z0-9_-]{1,64}$``.

The schemas checked, each kind found at least once (so the test cannot pass on nothing):

- every standard component's props schema (``STANDARD_COMPONENT_CATALOG``): a model that
  emits a component fills these props, so they are tool input schemas too;
- the exported tools: every ``ChatTool`` a public package exports (none today), and the tool
  definitions the ``agents`` package builds, which are what it exports to a provider:
  ``answer_commit``'s own schema and every definition pydantic-ai sends for agents built by
  ``create_agent`` (function and output tools, analyst or not, text or structured);
- every definition pydantic-ai sends for the chat toolset the adapter builds from a chat's
  ``ChatTool`` values (one per standard component's props, one without a schema, one that
  needs confirmation), which must carry each chat tool's schema unchanged.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from collections.abc import Iterator, Mapping
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

import agentskit_chat
from agentskit_chat.agents import create_agent, from_pydantic_ai
from agentskit_chat.answer_commit import ANSWER_COMMIT_TOOL_NAME, answer_commit_json_schema
from agentskit_chat.components import STANDARD_COMPONENT_CATALOG
from agentskit_chat.runtime import ChatConfig, ChatController, ChatTool

_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_ROOT_FORBIDDEN = ("$schema", "$id", "oneOf", "anyOf", "allOf", "not", "enum", "const", "if")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = (
    "items",
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def _subschemas(schema: Any, path: str = "#") -> Iterator[tuple[str, Mapping[str, Any]]]:
    if not isinstance(schema, Mapping):
        return
    yield path, schema
    for keyword in _SCHEMA_MAPS:
        for name, sub in (schema.get(keyword) or {}).items():
            yield from _subschemas(sub, f"{path}/{keyword}/{name}")
    for keyword in _SCHEMA_ONE:
        yield from _subschemas(schema.get(keyword), f"{path}/{keyword}")
    for keyword in _SCHEMA_LISTS:
        for index, sub in enumerate(schema.get(keyword) or ()):
            yield from _subschemas(sub, f"{path}/{keyword}/{index}")


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    node: Any = root
    for token in ref.removeprefix("#/").split("/") if ref != "#" else ():
        node = node[token.replace("~1", "/").replace("~0", "~")]
    return node


def tool_schema_problems(name: str, schema: Mapping[str, Any]) -> list[str]:
    """Every restriction ``schema`` breaks (an empty list when it is fine)."""
    problems: list[str] = []
    try:
        Draft202012Validator.check_schema(schema)
    except Exception as error:
        problems.append(f"not draft 2020-12: {error}")
    if not _NAME.match(name):
        problems.append("tool name does not match ^[a-zA-Z0-9_-]{1,64}$")
    if schema.get("type") != "object":
        problems.append("root is not type object")
    problems += [f"root has {k}" for k in _ROOT_FORBIDDEN if k in schema]
    try:
        if json.loads(json.dumps(schema)) != schema:
            problems.append("not plain JSON")
    except (TypeError, ValueError):
        problems.append("not plain JSON")
    for path, sub in _subschemas(schema):
        if "prefixItems" in sub:
            problems.append(f"{path} uses prefixItems")
        items = sub.get("items")
        if isinstance(items, list) or items is False:
            problems.append(f"{path} has a tuple or false items")
        ref = sub.get("$ref")
        if ref is not None:
            try:
                if not ref.startswith("#"):
                    raise KeyError(ref)
                _resolve(schema, ref)
            except (KeyError, IndexError, TypeError):
                problems.append(f"{path} has a $ref that is not local or does not resolve")
        declared = sub.get("properties") or {}
        missing = [r for r in sub.get("required") or () if r not in declared]
        if missing:
            problems.append(f"{path} requires undeclared {missing}")
    return problems


# --- what the project registers ------------------------------------------------------------------


class Count(BaseModel):
    count: int


def lookup(path: str, limit: int = 10) -> str:
    """Look a file up.

    Args:
        path: The file's path.
        limit: How many matches to return.
    """
    return path[:limit]


_COMMIT = {"fields": [{"label": "n", "value": 1}], "basis": "b"}


def _agent_tools() -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    variants: list[tuple[str, dict[str, Any]]] = [
        ("analyst", {}),
        ("builder", {}),
        ("analyst-structured", {"output_type": Count}),
        ("analyst-off", {"environ": {"AGENTSKIT_ANSWER_COMMIT": "0"}}),
    ]
    for label, options in variants:
        seen: list[AgentInfo] = []

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            seen.append(info)  # noqa: B023 - used within this iteration only
            if not info.output_tools:
                return ModelResponse(parts=[TextPart("ok")])
            tool = info.output_tools[0].name
            args = {"count": 1} if tool != ANSWER_COMMIT_TOOL_NAME else _COMMIT
            return ModelResponse(parts=[ToolCallPart(tool, args)])

        name = label.split("-")[0]
        agent = create_agent(FunctionModel(model), name=name, tools=[lookup], **options)
        agent.run_sync("q")
        info = seen[0]
        for tool in [*info.function_tools, *info.output_tools]:
            yield f"agents:{label}:{tool.name}", tool.name, tool.parameters_json_schema


def _component_schemas() -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    for definition in STANDARD_COMPONENT_CATALOG:
        schema = definition.props_schema.model_json_schema()
        yield f"component:{definition.key}", definition.key, schema


async def _done(args: Mapping[str, Any]) -> str:
    return "done"


def _chat_tools() -> list[ChatTool]:
    shown = [
        ChatTool(
            name=f"show_{key.replace('-', '_')}",
            description=f"Show a {key} component.",
            parameters=schema,
            execute=_done,
        )
        for _, key, schema in _component_schemas()
    ]
    gated = ChatTool(
        name="send_note",
        description="Send a note to the team.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
        execute=_done,
        requires_confirmation=True,
    )
    return [*shown, ChatTool(name="ping", description="Check the service.", execute=_done), gated]


def _chat_toolset_definitions() -> list[Any]:
    """The definitions pydantic-ai sends for the chat toolset, through a chat controller."""
    seen: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        return ModelResponse(parts=[TextPart("ok")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        seen.append(info)
        yield "ok"

    agent: Agent[None, str] = Agent(FunctionModel(model, stream_function=stream))
    tools = _chat_tools()
    controller = ChatController(ChatConfig(adapter=from_pydantic_ai(agent), tools=tuple(tools)))
    anyio.run(controller.send, "hi")
    assert controller.state.status == "idle"
    names = {tool.name for tool in tools}
    return [tool for tool in seen[0].function_tools if tool.name in names]


def _chat_toolset_tools() -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    for tool in _chat_toolset_definitions():
        yield f"chat-toolset:{tool.name}", tool.name, tool.parameters_json_schema


def _exported_chat_tools() -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    for module_info in pkgutil.iter_modules(agentskit_chat.__path__):
        if module_info.name.startswith("_") or not module_info.ispkg:
            continue
        module = importlib.import_module(f"agentskit_chat.{module_info.name}")
        for export in getattr(module, "__all__", ()):
            value = getattr(module, export)
            for tool in value if isinstance(value, list | tuple) else (value,):
                if isinstance(tool, ChatTool) and tool.parameters is not None:
                    yield f"exported:{module_info.name}.{export}", tool.name, tool.parameters


def registered_schemas() -> list[Any]:
    return [
        pytest.param(
            ANSWER_COMMIT_TOOL_NAME, answer_commit_json_schema(), id="agents:answer_commit"
        ),
        *(pytest.param(name, schema, id=i) for i, name, schema in _agent_tools()),
        *(pytest.param(name, schema, id=i) for i, name, schema in _exported_chat_tools()),
        *(pytest.param(name, schema, id=i) for i, name, schema in _component_schemas()),
        *(pytest.param(name, schema, id=i) for i, name, schema in _chat_toolset_tools()),
    ]


def test_every_kind_of_schema_is_found() -> None:
    ids = [param.id for param in registered_schemas()]
    assert len(ids) == len(set(ids))
    components = [i for i in ids if i.startswith("component:")]
    assert len(components) >= 12
    # Exported tools: ChatTools a public package exports, and what the agents package builds.
    exported = [i for i in ids if i.startswith(("exported:", "agents:"))]
    assert any(i.endswith("answer_commit") for i in exported)
    toolset = [i for i in ids if i.startswith("chat-toolset:")]
    assert len(toolset) >= len(components) + 2


def test_the_chat_toolset_sends_each_chat_tools_schema_unchanged() -> None:
    sent = {tool.name: tool for tool in _chat_toolset_definitions()}
    tools = _chat_tools()
    assert tools
    assert sorted(sent) == sorted(tool.name for tool in tools)
    for tool in tools:
        definition = sent[tool.name]
        expected = tool.parameters or {"type": "object", "properties": {}}
        assert definition.parameters_json_schema == expected
        assert definition.description == tool.description
        assert definition.kind == ("unapproved" if tool.requires_confirmation else "function")


@pytest.mark.parametrize(("name", "schema"), registered_schemas())
def test_every_registered_tool_schema_is_valid_for_anthropic(
    name: str, schema: Mapping[str, Any]
) -> None:
    assert tool_schema_problems(name, schema) == []


def test_the_agent_schemas_include_answer_commit_for_analysts_only() -> None:
    ids = [tool_id for tool_id, _, _ in _agent_tools()]
    assert "agents:analyst:answer_commit" in ids
    assert "agents:analyst:lookup" in ids
    others = [i for i in ids if not i.startswith("agents:analyst:")]
    assert others
    assert not any(i.endswith(":answer_commit") for i in others)


BAD = [
    pytest.param("t", {"type": "object", "properties": {"p": {"prefixItems": []}}}, "prefixItems"),
    pytest.param(
        "t",
        {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"},
        "$schema",
    ),
    pytest.param("t", {"type": "array"}, "type object"),
    pytest.param("t", {"type": "object", "anyOf": [{"required": ["a"]}]}, "anyOf"),
    pytest.param("t", {"type": "object", "properties": {"a": {"items": [{}]}}}, "tuple"),
    pytest.param("t", {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}}, "$ref"),
    pytest.param("t", {"type": "object", "required": ["a"]}, "undeclared"),
    pytest.param("t", {"type": "object", "properties": {"a": {"type": 3}}}, "2020-12"),
    pytest.param("bad name!", {"type": "object"}, "tool name"),
]


@pytest.mark.parametrize(("name", "schema", "problem"), BAD)
def test_the_checker_finds_each_restriction(
    name: str, schema: Mapping[str, Any], problem: str
) -> None:
    problems = tool_schema_problems(name, schema)
    assert any(problem in p for p in problems), problems
