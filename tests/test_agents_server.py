"""Sub-agents and plans over HTTP: SSE frames with agent paths, the plan in the session view,
the OpenAI endpoint's reasoning, and a question at depth 2 answered on another worker."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from openai import OpenAI

from agents_team import team_app
from server_support import parse_sse, running, start_worker, stop_workers


def test_sse_frames_carry_the_agent_path_and_the_session_shows_the_plan(tmp_path: Path) -> None:
    with running(team_app("memory:", str(tmp_path / "effects"), "plan", "w1,2")) as base:
        session = httpx.post(f"{base}/v1/sessions").json()["session"]
        frames = parse_sse(httpx.post(f"{base}/v1/sessions/{session}/messages", json={"message": "Bump."}).text)
        kinds = [(kind, data.get("agent")) for kind, data in frames[:-1]]
        assert (
            ("plan", "boss") in kinds and ("user", "boss/step 1/worker") in kinds and ("answer", "boss/step 2") in kinds
        )
        end = frames[-1][1]
        assert end["status"] == "done" and "bumped 1" in end["answer"] and "bumped 2" in end["answer"]
        view = httpx.get(f"{base}/v1/sessions/{session}").json()
        plan = view["turns"][0]["plans"][-1]
        assert [(s["task"], s["agent"], s["status"]) for s in plan] == [
            ("bump 1", "worker", "done"),
            ("bump 2", None, "done"),
        ]
        assert plan[0]["result"] == "worked: bumped 1"


def test_openai_reasoning_shows_the_sub_agents_steps(tmp_path: Path) -> None:
    with (
        running(team_app("memory:", str(tmp_path / "effects"), "deep")) as base,
        OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0) as client,
    ):
        asked = client.chat.completions.create(model="team", messages=[{"role": "user", "content": "How far?"}])
        assert asked.choices[0].message.content == "Where are you?"
        reasoning = asked.choices[0].message.model_extra["reasoning_content"]
        assert "Action: researcher" in reasoning
        assert "[researcher] Task: research the distance" in reasoning
        assert "[researcher/fetcher] Action: ask_user" in reasoning
        history = [
            {"role": "user", "content": "How far?"},
            {"role": "assistant", "content": "Where are you?"},
            {"role": "user", "content": "Lyon"},
        ]
        chunks = list(client.chat.completions.create(model="team", messages=history, stream=True))  # type: ignore[call-overload]
        streamed = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert "[researcher/fetcher] Answer: fetched: Lyon" in streamed
        assert "[researcher/fetcher] Reply: Lyon" in streamed and "Task: Lyon" not in streamed
        assert content == "boss: found: fetched: Lyon"


def test_a_question_at_depth_two_is_answered_on_another_worker(postgres_url: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects"
    env = {"REACTCHAT_EFFECTS": str(effects), "REACTCHAT_TEAM": "deep"}
    factory = "agents_team:app_from_env"
    workers = [start_worker(postgres_url, tmp_path / f"{name}.log", factory, **env) for name in "ab"]
    try:
        (_, a), (_, b) = workers
        session = httpx.post(f"{a}/v1/sessions").json()["session"]
        frames = parse_sse(httpx.post(f"{a}/v1/sessions/{session}/messages", json={"message": "How far?"}).text)
        end = frames[-1][1]
        assert end["status"] == "waiting" and end["question"] == "Where are you?"
        view = httpx.get(f"{b}/v1/sessions/{session}").json()
        assert view["status"] == "waiting" and view["pending"]["reply_to"] == end["reply_to"]
        answer = {"message": "Lyon", "reply_to": end["reply_to"]}
        frames = parse_sse(httpx.post(f"{b}/v1/sessions/{session}/messages", json=answer, timeout=30).text)
        assert frames[-1][1]["answer"] == "boss: found: fetched: Lyon"
        assert [data["agent"] for kind, data in frames[:3]] == ["boss/researcher/fetcher"] * 3
        again = httpx.post(f"{a}/v1/sessions/{session}/messages", json=answer)
        assert again.status_code == 409  # AlreadyAnswered, on the other worker
        assert effects.read_text().count("\n") == 1
    finally:
        stop_workers(workers)


def test_a_plan_turn_whose_worker_dies_is_finished_by_another_exactly_once(postgres_url: str, tmp_path: Path) -> None:
    """SIGKILL of the worker running a plan-and-execute turn whose steps a sub-agent runs, while
    a model call is under way: the other worker on the same PostgreSQL takes the turn over and
    finishes it; every event the client saw is kept, and no tool call runs twice."""
    effects = tmp_path / "effects"
    env = {
        "REACTCHAT_EFFECTS": str(effects),
        "REACTCHAT_TEAM": "plan",
        "REACTCHAT_STEPS": "w1,w2",
        "REACTCHAT_DELAY": "1",
    }
    factory = "agents_team:app_from_env"
    workers = [start_worker(postgres_url, tmp_path / f"{name}.log", factory, **env) for name in "ab"]
    try:
        (a, a_url), (_, b_url) = workers
        session = httpx.post(f"{a_url}/v1/sessions").json()["session"]
        seen = ""
        with httpx.stream(
            "POST", f"{a_url}/v1/sessions/{session}/messages", json={"message": "Do it."}, timeout=60
        ) as r:
            for chunk in r.iter_text():
                seen += chunk
                # the first step's bump observed (its effect durable), a model call of 1 s under way
                if '"tool":"bump"' in seen.replace(" ", "") and "event: observation" in seen and seen.endswith("\n\n"):
                    break
            a.kill()
        before = parse_sse(seen)
        deadline = time.monotonic() + 60
        while (view := httpx.get(f"{b_url}/v1/sessions/{session}").json())["status"] != "done":
            assert view["status"] in ("running", "interrupted"), view["status"]
            assert time.monotonic() < deadline, "the other worker did not finish the turn"
            time.sleep(0.2)
        events = view["turns"][0]["events"]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))  # nothing lost, nothing twice
        seqs = {e["seq"]: e for e in events}
        assert all(seqs[data["seq"]]["type"] == kind for kind, data in before if "seq" in data)
        runs = [line.split()[0] for line in effects.read_text().splitlines()]
        assert len(runs) == 2 and len(set(runs)) == 2, runs  # each step's bump ran once
        assert view["turns"][0]["answer"] == "worked: bumped 1 | worked: bumped 2"
    finally:
        stop_workers(workers)
