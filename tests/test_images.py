"""Images in and out: checked from their headers, sent to OpenAI and Anthropic as their APIs
document (the official SDKs against a loopback server that records the bodies), replaced by
a note for models that cannot see them, and taken from a real MCP server's image content
and from the charts ``run_python`` draws."""

from __future__ import annotations

import base64
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.pictures import png
from fixtures.replay_server import Canned, ReplayServer, anthropic_message, openai_call, openai_completion
from reactchat import Agent, ScriptedModel, tool
from reactchat.mcp import MCPServer
from reactchat.messages import ImagePart, Reply, Request, ToolCallPart, ToolResultMessage, UserMessage
from reactchat.messages.images import MAX_IMAGE_BYTES, ImageRejected, Observation, checked
from reactchat.models.anthropic import AnthropicModel
from reactchat.models.local import LocalModel
from reactchat.models.openai import OpenAIModel

CHART = png(5, 2)
MCP_IMAGES = str(Path(__file__).parent / "fixtures" / "mcp_images.py")


@tool
def draw(title: str = "chart") -> Observation:
    """Draw the chart."""
    return Observation(f"drew {title}.png", (checked(f"{title}.png", CHART),))


def calls(*names: str) -> Reply:
    return Reply(parts=[ToolCallPart(id=f"call_{n}", name=n, input={}) for n in names], stop_reason="tool_use")


def data_url(data: bytes, kind: str = "image/png") -> str:
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"


# ------------------------------------------------------------------ checking


def pil_image(kind: str, **options: Any) -> bytes:
    image_module = pytest.importorskip("PIL.Image", reason="Pillow makes the JPEG and WebP samples")
    mode = "RGBA" if options.pop("alpha", False) else "RGB"
    out = io.BytesIO()
    image_module.new(mode, (321, 123), (200, 30, 30, 128)[: len(mode)]).save(out, kind, **options)
    return out.getvalue()


@pytest.mark.parametrize(
    ("kind", "options", "media_type"),
    [
        ("PNG", {}, "image/png"),
        ("JPEG", {}, "image/jpeg"),
        ("JPEG", {"progressive": True}, "image/jpeg"),
        ("WEBP", {"lossless": False}, "image/webp"),
        ("WEBP", {"lossless": True}, "image/webp"),
        ("WEBP", {"alpha": True, "lossless": False}, "image/webp"),
    ],
)
def test_a_real_image_is_read_from_its_header(kind: str, options: dict[str, Any], media_type: str) -> None:
    data = pil_image(kind, **options)
    image = checked("photo", data)
    assert (image.media_type, image.width, image.height, image.size) == (media_type, 321, 123, len(data))
    assert image.data == data


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"GIF89a" + b"\x00" * 20, "not a PNG, JPEG or WebP"),
        (b"hello, world", "not a PNG, JPEG or WebP"),
        (CHART[:20], "header is broken or cut short"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 7 + b"\xff\xda\x00\x02", "header is broken"),
        (png(100_000, 100_000, rows=1), "100000x100000 pixels, over the limit"),
        (png(9000, 1, rows=1), "9000x1 pixels, over the limit of 8000 a side"),
        (png(0, 5, rows=0), "its header says 0x5 pixels"),
        (CHART + b"\x00" * MAX_IMAGE_BYTES, "bytes, over the limit"),
    ],
)
def test_bad_images_are_refused_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(ImageRejected, match=reason) as refused:
        checked("upload.png", data)
    assert str(refused.value).startswith("image 'upload.png' refused: ")


def test_the_bytes_of_an_image_stay_out_of_its_json() -> None:
    image = checked("chart.png", CHART)
    assert "data" not in image.model_dump_json()
    assert image.note == f"[image chart.png: PNG, 5x2, {len(CHART)} bytes; this model cannot see images]"


# ------------------------------------------------------------------ OpenAI


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ReplayServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with ReplayServer() as replay:
        yield replay


def openai(server: ReplayServer, name: str = "gpt-4o-mini", **options: Any) -> OpenAIModel:
    return OpenAIModel(name, base_url=f"{server.url}/v1", api_key="sk-test", stream=False, backoff=0.001, **options)


def anthropic(server: ReplayServer) -> AnthropicModel:
    return AnthropicModel("claude-haiku-4-5", base_url=server.url, api_key="sk-ant-test", stream=False, backoff=0.001)


def test_openai_vision_models_are_known_by_name_and_can_be_told() -> None:
    assert OpenAIModel("gpt-4o-mini", api_key="k").supports_images
    assert OpenAIModel("gpt-4.1", api_key="k").supports_images
    assert not OpenAIModel("gpt-3.5-turbo", api_key="k").supports_images
    assert not OpenAIModel("o3-mini", api_key="k").supports_images
    assert OpenAIModel("my-local-llava", api_key="k", base_url="http://127.0.0.1:9/v1").supports_images
    assert OpenAIModel("qwen3", api_key="k", images=True).supports_images


async def test_openai_gets_a_users_image_as_an_image_url_part(server: ReplayServer) -> None:
    server.push(Canned(body=openai_completion("A grey chart.")))
    image = checked("chart.png", CHART)
    reply = await openai(server).complete(Request(messages=[UserMessage(content="What is this?", images=(image,))]))
    assert reply.text == "A grey chart."
    assert server.requests[0].json["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": data_url(CHART)}},
            ],
        }
    ]


async def test_openai_gets_a_tools_image_in_a_user_message_after_the_tool_results(server: ReplayServer) -> None:
    server.push(
        Canned(
            body=openai_completion(
                tool_calls=[openai_call("call_1", "draw", "{}"), openai_call("call_2", "draw", '{"title": "again"}')]
            )
        ),
        Canned(body=openai_completion("It rises.")),
    )
    agent = Agent(model=openai(server), tools=[draw], protocol="native", store="memory:")
    result = await agent.arun("Draw it and tell me the trend.")
    assert result.answer == "It rises."
    sent = server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert sent[3] == {"role": "tool", "tool_call_id": "call_1", "content": "drew chart.png"}
    names = next(m for m in sent[5]["content"] if m["type"] == "text")["text"]
    assert names.endswith("chart.png, again.png")
    urls = [part["image_url"]["url"] for part in sent[5]["content"] if part["type"] == "image_url"]
    assert urls == [data_url(CHART)] * 2
    # the image is the session's artifact, and the stored observation names it without its bytes
    kept = await agent.store.artifact(result.session, "chart.png")  # type: ignore[attr-defined]
    assert kept is not None and kept.data == CHART
    observed = [e for e in await agent.store.events(result.session) if e.type == "observation"]
    assert [image.name for image in observed[0].images] == ["chart.png"]  # type: ignore[union-attr]
    assert "data" not in observed[0].model_dump_json()


async def test_an_openai_model_without_vision_gets_a_note(server: ReplayServer) -> None:
    server.push(
        Canned(body=openai_completion(tool_calls=[openai_call("call_1", "draw", "{}")])),
        Canned(body=openai_completion("I cannot see it.")),
    )
    agent = Agent(model=openai(server, "gpt-3.5-turbo"), tools=[draw], protocol="native", store="memory:")
    await agent.arun("Draw it.")
    sent = server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    assert (
        sent[3]["content"]
        == f"drew chart.png\n[image chart.png: PNG, 5x2, {len(CHART)} bytes; this model cannot see images]"
    )


# ------------------------------------------------------------------ Anthropic


async def test_anthropic_gets_image_blocks_in_the_message_and_in_the_tool_result(server: ReplayServer) -> None:
    server.push(
        Canned(body=anthropic_message([{"type": "text", "text": "A grey chart."}], "end_turn")),
        Canned(
            body=anthropic_message([{"type": "tool_use", "id": "toolu_1", "name": "draw", "input": {}}], "tool_use")
        ),
        Canned(body=anthropic_message([{"type": "text", "text": "It rises."}], "end_turn")),
    )
    source = {"type": "base64", "media_type": "image/png", "data": base64.b64encode(CHART).decode()}
    block = {"type": "image", "source": source}
    image = checked("chart.png", CHART)
    model = anthropic(server)
    reply = await model.complete(Request(messages=[UserMessage(content="What is this?", images=(image,))]))
    await model.aclose()  # its connection closed now, not whenever the collector finds it
    assert reply.text == "A grey chart."
    assert server.requests[0].json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, block]}
    ]
    model = anthropic(server)
    agent = Agent(model=model, tools=[draw], protocol="native", store="memory:")
    assert (await agent.arun("Draw it.")).answer == "It rises."
    await model.aclose()
    drawn = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "drew chart.png"}, block],
    }
    assert server.requests[2].json["messages"][2]["content"] == [drawn]


# ------------------------------------------------------------------ models that read text


def test_the_text_protocol_shows_images_with_the_question_and_names_them_in_the_observation() -> None:
    model = ScriptedModel(
        ["I draw.\nAction: draw\nAction Input: {}", "Done.\nFinal Answer: it rises"], supports_images=True
    )
    Agent(model=model, tools=[draw]).run("Draw it.")
    user = model.requests[1].messages[1]
    assert isinstance(user, UserMessage) and [(i.name, i.data) for i in user.images] == [("chart.png", CHART)]
    assert "[image chart.png: shown with the question]" in model.requests[1].messages[2].text  # type: ignore[union-attr]


def test_a_local_model_is_sent_a_note_and_answers_from_it() -> None:
    local = LocalModel("smollm2-135m", n_threads=1, max_tokens=8)
    assert local.supports_images is False
    seen: list[Request] = []

    class Recorded:
        """The real local model, its requests kept (what the engine sent it)."""

        name, supports_tools, context_tokens = local.name, True, local.context_tokens
        supports_images = local.supports_images

        async def complete(self, request: Request) -> Reply:
            seen.append(request)
            if len(seen) == 1:
                return calls("draw")
            return await local.complete(request)

    Agent(model=Recorded(), tools=[draw], protocol="native", max_steps=2).run("Draw it.")
    result = seen[1].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.images == ()
    assert result.content.endswith("this model cannot see images]")


# ------------------------------------------------------------------ MCP image content


def test_a_real_mcp_servers_image_reaches_the_model_and_a_bomb_is_refused() -> None:
    model = ScriptedModel([calls("chart"), calls("bomb"), "A chart."], supports_images=True)
    server = MCPServer(sys.executable, [MCP_IMAGES], name="pictures")
    result = Agent(model=model, tools=[server], protocol="native", store="memory:").run("Show me the chart.")
    assert result.answer == "A chart."
    chart = model.requests[1].messages[-1]
    assert isinstance(chart, ToolResultMessage)
    assert [(i.media_type, i.width, i.height, i.data) for i in chart.images] == [("image/png", 5, 2, CHART)]
    assert chart.images[0].name.startswith("pictures-chart-1-") and chart.images[0].name.endswith(".png")
    bomb = model.requests[2].messages[-1]
    assert isinstance(bomb, ToolResultMessage) and bomb.images == ()
    assert "100000x100000 pixels, over the limit" in bomb.content


# ------------------------------------------------------------------ replayed runs read the bytes back


async def test_an_image_of_a_run_resumed_from_the_store_is_read_back(tmp_path: Path) -> None:
    asking = Reply(
        parts=[ToolCallPart(id="call_q", name="ask_user", input={"question": "Which colour?"})], stop_reason="tool_use"
    )
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    agent = Agent(model=ScriptedModel([calls("draw"), asking]), tools=[draw], protocol="native", store=url)
    waiting = await agent.arun("Draw it, then ask me.")
    assert waiting.status == "waiting"
    # another process: nothing of the first run is in memory, the image's bytes come from the store
    later = ScriptedModel(["It is red."], supports_images=True)
    again = Agent(model=later, tools=[draw], protocol="native", store=url)
    assert (await again.arun("red", session=waiting.session)).answer == "It is red."
    results = [m for m in later.requests[0].messages if isinstance(m, ToolResultMessage) and m.images]
    assert [(i.name, i.data) for r in results for i in r.images] == [("chart.png", CHART)]


def test_an_image_part_round_trips_without_its_bytes() -> None:
    image = ImagePart(name="a.png", media_type="image/png", width=1, height=1, size=3, data=b"abc")
    assert ImagePart.model_validate_json(image.model_dump_json()).data == b""


# ------------------------------------------------------------------ the user's images


@pytest.mark.parametrize("protocol", ["native", "react"])
def test_a_users_image_goes_with_the_question_and_a_later_process_reads_it_back(tmp_path: Path, protocol: str) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    asking = Reply(
        parts=[ToolCallPart(id="call_q", name="ask_user", input={"question": "Which part?"})], stop_reason="tool_use"
    )
    first = ScriptedModel(
        [asking if protocol == "native" else ' I ask.\nAction: ask_user\nAction Input: {"question": "Which part?"}'],
        supports_images=True,
    )
    photo = checked("my photo?.png", CHART)
    waiting = Agent(model=first, protocol=protocol, store=url).run("What is in it?", images=[photo])
    assert waiting.status == "waiting"
    sent = first.requests[0].messages[1]
    assert isinstance(sent, UserMessage) and [(i.name, i.data) for i in sent.images] == [("my photo_.png", CHART)]
    later = ScriptedModel(["A grey square." if protocol == "native" else " Seen.\nFinal Answer: A grey square."])
    done = Agent(model=later, protocol=protocol, store=url).run("the top", session=waiting.session)
    assert done.answer == "A grey square."
    question = later.requests[0].messages[1]
    assert isinstance(question, UserMessage) and question.images == ()  # this model does not see images
    assert f"[image my photo_.png: PNG, 5x2, {len(CHART)} bytes; this model cannot see images]" in question.content


# ------------------------------------------------------------------ over HTTP


def test_an_image_uploaded_over_http_reaches_the_model_with_the_message(tmp_path: Path) -> None:
    import httpx

    from reactchat.server import ServerConfig, create_app
    from server_support import parse_sse, running

    model = ScriptedModel(["A grey chart."], supports_images=True)
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    app = create_app(lambda store: Agent(model=model, protocol="native", store=store), config=ServerConfig(store=url))
    with running(app) as base, httpx.Client(base_url=base, timeout=30) as client:
        session = client.post("/v1/sessions").json()["session"]
        upload = client.post(f"/v1/sessions/{session}/files", files={"file": ("chart.png", CHART)})
        assert upload.status_code == 201, upload.text
        assert upload.json()["file"] == {
            "name": "chart.png",
            "size": len(CHART),
            "image": {"media_type": "image/png", "width": 5, "height": 2},
        }
        streamed = client.post(
            f"/v1/sessions/{session}/files",
            files={"file": ("again.png", CHART)},
            headers={"accept": "text/event-stream"},  # as the page asks
        )
        frames = parse_sse(streamed.text)
        assert [kind for kind, _ in frames] == ["file"] and frames[0][1]["file"]["image"]["width"] == 5
        bomb = client.post(f"/v1/sessions/{session}/files", files={"file": ("big.png", png(50_000, 50_000, rows=1))})
        assert bomb.status_code == 413 and "50000x50000 pixels, over the limit" in bomb.json()["error"]["message"]
        broken = client.post(f"/v1/sessions/{session}/files", files={"file": ("cut.png", CHART[:20])})
        assert broken.status_code == 400 and "header is broken" in broken.json()["error"]["message"]
        unknown = client.post(f"/v1/sessions/{session}/messages", json={"message": "?", "images": ["nope.png"]})
        assert unknown.status_code == 409 and "no image 'nope.png' in this session" in unknown.text
        said = client.post(
            f"/v1/sessions/{session}/messages",
            json={"message": "What is it?", "images": ["chart.png"], "stream": False},
        )
        assert said.status_code == 200, said.text
        assert said.json()["answer"] == "A grey chart."
        served = client.get(f"/v1/sessions/{session}/artifacts/chart.png")
        assert served.headers["content-type"] == "image/png" and served.content == CHART
    question = model.requests[0].messages[1]
    assert isinstance(question, UserMessage) and question.content == "What is it?"
    assert [(i.name, i.data) for i in question.images] == [("chart.png", CHART)]
    assert len(model.requests) == 1  # the refused message ran no turn
