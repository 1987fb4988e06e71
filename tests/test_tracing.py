"""OpenTelemetry spans and metrics of real runs, read back with the SDK's in-memory exporter."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from reactchat import Agent, ScriptedModel, tool
from reactchat.engine import tracing
from reactchat.knowledge import attach
from reactchat.toolbox import calculator, read_links_in_messages
from reactchat.toolbox._fetch import ENV_ALLOW

ACT = ' I need a 15% markup.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}'
FINAL = " I know it.\nFinal Answer: 92.184"
SECRET = "the-secret-rose-price"


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        found: dict[str, list[Any]] = {}
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


@pytest.fixture
def otel(monkeypatch: pytest.MonkeyPatch) -> Iterator[Telemetry]:
    monkeypatch.delenv(tracing.CAPTURE_ENV, raising=False)
    telemetry = Telemetry()
    tracing.configure(tracer_provider=telemetry.tracer_provider, meter_provider=telemetry.meter_provider)
    yield telemetry
    tracing.configure()  # back to the global providers


def everything_recorded(span: ReadableSpan) -> str:
    """Every attribute value, event and status text of a span, as one string to search."""
    parts = [json.dumps({k: str(v) for k, v in (span.attributes or {}).items()})]
    for event in span.events:
        parts.append(event.name + json.dumps({k: str(v) for k, v in (event.attributes or {}).items()}))
    parts.append(span.status.description or "")
    return "\n".join(parts)


def test_a_turn_is_an_invoke_agent_span_over_chat_and_execute_tool_spans(otel: Telemetry) -> None:
    agent = Agent(model=ScriptedModel([ACT, FINAL]), tools=[calculator])
    result = agent.run("What is 80.16 plus 15%?")
    (turn,) = otel.named("invoke_agent")
    chats = otel.named("chat")
    (call,) = otel.named("execute_tool")
    assert turn.name == "invoke_agent reactchat" and turn.kind == SpanKind.INTERNAL
    assert [c.name for c in chats] == ["chat scripted", "chat scripted"]
    assert all(c.kind == SpanKind.CLIENT for c in chats)
    assert call.name == "execute_tool calculator" and call.kind == SpanKind.INTERNAL
    assert turn.parent is None
    for child in [*chats, call]:
        assert child.parent is not None and child.parent.span_id == turn.context.span_id
        assert child.context.trace_id == turn.context.trace_id

    attributes = dict(chats[0].attributes or {})
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "reactchat"
    assert attributes["gen_ai.request.model"] == "scripted"
    assert attributes["gen_ai.response.model"] == "scripted"
    assert attributes["gen_ai.conversation.id"] == result.session
    assert list(attributes["gen_ai.response.finish_reasons"]) == ["stop"]
    stored = result.events[1].usage  # the thought of the first step
    assert stored is not None
    assert attributes["gen_ai.usage.input_tokens"] == stored.input_tokens
    assert attributes["gen_ai.usage.output_tokens"] == stored.output_tokens

    tool_attributes = dict(call.attributes or {})
    assert tool_attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool_attributes["gen_ai.tool.name"] == "calculator"
    assert tool_attributes["gen_ai.tool.call.id"] == result.events[2].call_id  # type: ignore[union-attr]
    assert dict(turn.attributes or {})["gen_ai.agent.name"] == "reactchat"
    assert dict(turn.attributes or {})["gen_ai.conversation.id"] == result.session

    # no content unless the user opted in
    for span in otel.spans:
        recorded = everything_recorded(span)
        assert "80.16" not in recorded and "92.184" not in recorded, span.name

    metrics = otel.metrics()
    tokens = metrics["gen_ai.client.token.usage"]
    assert {p.attributes["gen_ai.token.type"] for p in tokens} == {"input", "output"}
    assert sum(p.count for p in tokens) == 4  # two calls, input and output each
    (duration,) = metrics["gen_ai.client.operation.duration"]
    assert duration.count == 2 and duration.attributes["gen_ai.request.model"] == "scripted"


def test_content_is_recorded_only_when_the_user_opts_in(otel: Telemetry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tracing.CAPTURE_ENV, "true")
    Agent(model=ScriptedModel([ACT, FINAL]), tools=[calculator]).run("What is 80.16 plus 15%?")
    first = dict(otel.named("chat")[0].attributes or {})
    messages = json.loads(str(first["gen_ai.input.messages"]))
    assert messages[0]["role"] == "system" and "80.16 plus 15%" in json.dumps(messages)
    output = json.loads(str(first["gen_ai.output.messages"]))
    assert output[0]["role"] == "assistant" and "calculator" in output[0]["parts"][0]["content"]
    call = dict(otel.named("execute_tool")[0].attributes or {})
    assert json.loads(str(call["gen_ai.tool.call.arguments"])) == {"expression": "80.16 * 1.15"}
    assert call["gen_ai.tool.call.result"] == "92.184"


@pytest.mark.parametrize("capture", [False, True])
def test_a_skipped_link_is_an_event_of_the_turn_s_span(
    otel: Telemetry, monkeypatch: pytest.MonkeyPatch, capture: bool
) -> None:
    monkeypatch.delenv(ENV_ALLOW, raising=False)
    if capture:
        monkeypatch.setenv(tracing.CAPTURE_ENV, "true")
    agent = Agent(model=ScriptedModel([FINAL]))
    attach(agent)
    read_links_in_messages(agent)
    result = agent.run("Read http://0177.0.0.1/ and http://127.0.0.1:1/")
    assert result.status == "done"
    (turn,) = otel.named("invoke_agent")
    skipped = [dict(e.attributes or {}) for e in turn.events if e.name == "link skipped"]
    assert [e["reactchat.link.refused"] for e in skipped] == [True, True]
    if capture:
        assert [e["url.full"] for e in skipped] == ["http://0177.0.0.1/", "http://127.0.0.1:1/"]
        assert "a loopback address" in str(skipped[1]["reactchat.link.reason"])
    else:  # the addresses are the user's message, the reasons repeat them
        assert "127.0.0.1" not in everything_recorded(turn)


@tool
def florist(flower: str) -> str:
    """Look up a flower's price at the florist."""
    raise ValueError(f"{SECRET} for {flower}")


FLORIST = ' Ask the florist.\nAction: florist\nAction Input: {"flower": "rose"}'


def test_a_failing_tool_records_its_error_type_and_nothing_of_its_message(otel: Telemetry) -> None:
    result = Agent(model=ScriptedModel([FLORIST, " It failed.\nFinal Answer: unknown"]), tools=[florist]).run("rose?")
    assert result.status == "done"
    (call,) = otel.named("execute_tool")
    assert dict(call.attributes or {})["error.type"] == "ValueError"
    assert call.status.status_code == StatusCode.ERROR
    for span in otel.spans:
        assert SECRET not in everything_recorded(span), span.name


def test_with_capture_on_a_failing_tool_records_the_exception(otel: Telemetry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(tracing.CAPTURE_ENV, "true")
    Agent(model=ScriptedModel([FLORIST, " It failed.\nFinal Answer: unknown"]), tools=[florist]).run("rose?")
    (call,) = otel.named("execute_tool")
    assert SECRET in everything_recorded(call)


def test_an_agent_run_inside_a_tool_nests_under_its_execute_tool_span(otel: Telemetry) -> None:
    inner = Agent(model=ScriptedModel([ACT, FINAL]), tools=[calculator])

    @tool
    async def researcher(task: str) -> str:
        """Hand a task to the research agent."""
        return (await inner.arun(task)).answer or ""

    outer = Agent(
        model=ScriptedModel(
            [' Delegate.\nAction: researcher\nAction Input: {"task": "80.16 plus 15%"}', " Done.\nFinal Answer: 92.184"]
        ),
        tools=[researcher],
    )
    assert outer.run("What is 80.16 plus 15%?").answer == "92.184"
    outer_turn, inner_turn = sorted(otel.named("invoke_agent"), key=lambda s: s.start_time or 0)
    (delegate,) = [s for s in otel.spans if s.name == "execute_tool researcher"]
    assert delegate.parent is not None and delegate.parent.span_id == outer_turn.context.span_id
    assert inner_turn.parent is not None and inner_turn.parent.span_id == delegate.context.span_id
    (inner_tool,) = [s for s in otel.spans if s.name == "execute_tool calculator"]
    assert inner_tool.parent is not None and inner_tool.parent.span_id == inner_turn.context.span_id
    assert {s.context.trace_id for s in otel.spans} == {outer_turn.context.trace_id}


def test_a_paused_turn_and_its_resume_share_the_conversation_and_are_linked(otel: Telemetry, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 's.db'}"
    ask = ' I need the city.\nAction: ask_user\nAction Input: {"question": "Which city?"}'
    waiting = Agent(model=ScriptedModel([ask]), store=store).run("How far is Paris?")
    assert waiting.status == "waiting"
    # another Agent object over the same database: as another process would
    done = Agent(model=ScriptedModel([" Lyon.\nFinal Answer: 465 km"]), store=store).run(
        "Lyon", session=waiting.session
    )
    assert done.status == "done"
    paused, resumed = sorted(otel.named("invoke_agent"), key=lambda s: s.start_time or 0)
    for span in (paused, resumed):
        assert dict(span.attributes or {})["gen_ai.conversation.id"] == waiting.session
    assert dict(paused.attributes or {})["reactchat.turn.status"] == "waiting"
    assert dict(resumed.attributes or {})["reactchat.turn.status"] == "done"
    assert [link.context.span_id for link in resumed.links] == [paused.context.span_id]


def test_without_opentelemetry_runs_work_and_nothing_is_imported(tmp_path: Path) -> None:
    script = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Block())
import reactchat
from reactchat import Agent, ScriptedModel
from reactchat.toolbox import calculator
ACT = ' Use it.\\nAction: calculator\\nAction Input: {"expression": "2 * 3"}'
result = Agent(model=ScriptedModel([ACT, " Done.\\nFinal Answer: 6"]), tools=[calculator]).run("2*3?")
assert result.answer == "6", result
assert not [m for m in sys.modules if m.startswith("opentelemetry")]
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_importing_reactchat_does_not_import_opentelemetry() -> None:
    script = "import sys, reactchat; print([m for m in sys.modules if m.startswith('opentelemetry')])"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_with_no_provider_set_no_span_is_made_until_the_application_sets_one() -> None:
    script = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from reactchat.engine import tracing
assert tracing.start_turn("a", "s", "scripted") is tracing.NO_TRACE
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
run = tracing.start_turn("a", "s", "scripted")
run.end("done")
print([s.name for s in exporter.get_finished_spans()])
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "['invoke_agent a']", done.stderr
