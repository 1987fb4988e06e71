"""The text protocol parser contract (DESIGN.md): ``reactchat.react.parse``."""

from __future__ import annotations

import pytest

from reactchat import Action, FinalAnswer, FormatError
from reactchat.react import parse


def test_action_with_json_input() -> None:
    step = parse(' I should compute.\nAction: calculator\nAction Input: {"expression": "80.16 * 1.15"}')
    assert isinstance(step, Action)
    assert (step.tool, step.input, step.thought) == ("calculator", {"expression": "80.16 * 1.15"}, "I should compute.")


def test_final_answer() -> None:
    step = parse(" I now know the final answer.\nFinal Answer: 92.184 dollars")
    assert isinstance(step, FinalAnswer)
    assert step.answer == "92.184 dollars" and step.thought == "I now know the final answer."


def test_first_complete_step_wins() -> None:
    step = parse('Thought: t\nAction: search\nAction Input: {"q": "x"}\nFinal Answer: made up')
    assert isinstance(step, Action) and step.tool == "search"
    step = parse('Thought: t\nFinal Answer: 42\nAction: search\nAction Input: {"q": "x"}')
    assert isinstance(step, FinalAnswer) and step.answer == "42"


def test_text_after_a_model_written_observation_is_discarded() -> None:
    with pytest.raises(FormatError) as info:
        parse("Thought: t\nObservation: I imagine 5\nThought: so\nFinal Answer: 5")
    assert info.value.kind == "no_decision"
    step = parse('Thought: t\nAction: add\nAction Input: {"a": 1}\nObservation: 3\nFinal Answer: 3')
    assert isinstance(step, Action) and step.input == {"a": 1}


@pytest.mark.parametrize(
    "text",
    [
        'thought: t\naction: add\naction input: {"a": 1}',
        'THOUGHT : t\nACTION : add\nACTION INPUT : {"a": 1}',
        '**Thought:** t\n**Action:** add\n**Action Input:** {"a": 1}',
        '**Thought**: t\n**Action**: add\n**Action Input**: {"a": 1}',
        'Thought： t\nAction： add\nAction Input： {"a": 1}',
    ],
)
def test_labels_are_matched_leniently(text: str) -> None:
    step = parse(text)
    assert isinstance(step, Action) and step.tool == "add" and step.input == {"a": 1}


def test_answer_label_counts_as_final() -> None:
    step = parse("Thought: easy\nAnswer: 4")
    assert isinstance(step, FinalAnswer) and step.answer == "4"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("{'planet': 'Earth'}", {"planet": "Earth"}),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ('{"a": 1 /* one */, // the first\n "b": 2}', {"a": 1, "b": 2}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Sure, here it is: {"a": 1} hope that helps', {"a": 1}),
        ("{'ok': True, 'none': None}", {"ok": True, "none": None}),
        ("{'text': 'it said \"hi\"'}", {"text": 'it said "hi"'}),
        ("{'expression': '7 // 2'}", {"expression": "7 // 2"}),
        ('{"expression": "7 // 2",}', {"expression": "7 // 2"}),
        ("{'note': 'is True now', 'flag': True,}", {"note": "is True now", "flag": True}),
        ("{'t': 'it\\'s'}", {"t": "it's"}),
    ],
)
def test_action_input_json_is_repaired_where_unambiguous(raw: str, expected: dict[str, object]) -> None:
    step = parse(f"Thought: t\nAction: f\nAction Input: {raw}")
    assert isinstance(step, Action) and step.input == expected


@pytest.mark.parametrize("raw", ["{planet: Earth}", "{'planet': 'Earth'", '{"a": 1'])
def test_unrepairable_input_stays_a_string_for_the_engine_to_explain(raw: str) -> None:
    step = parse(f"Thought: t\nAction: f\nAction Input: {raw}")
    assert isinstance(step, Action) and isinstance(step.input, str) and step.input.startswith("{")


@pytest.mark.parametrize("name", ["add (add two numbers)", "`add`", "add", "'add'", "**add**", "add."])
def test_tool_name_forms(name: str) -> None:
    step = parse(f'Thought: t\nAction: {name}\nAction Input: {{"a": 1}}')
    assert isinstance(step, Action) and step.tool == "add"


def test_react_paper_bracket_form() -> None:
    step = parse("Thought: I need to search Colorado orogeny.\nAction: Search[Colorado orogeny]")
    assert isinstance(step, Action)
    assert step.tool == "Search" and step.input == "Colorado orogeny"


def test_trailing_pause_is_ignored() -> None:
    step = parse('Thought: t\nAction: f\nAction Input: {"a": 1}\nPAUSE')
    assert isinstance(step, Action) and step.input == {"a": 1}
    step = parse("Thought: t\nAction: f\nAction Input: hello\nPAUSE\n")
    assert isinstance(step, Action) and step.input == "hello"


def test_plain_string_input() -> None:
    step = parse("Thought: t\nAction: calculator\nAction Input: 80.16*1.15")
    assert isinstance(step, Action) and step.input == "80.16*1.15"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("The answer is 4.", "no_label"),
        ("", "no_label"),
        ("Thought: I am thinking only", "no_decision"),
        ("Thought: t\nAction:\nAction Input: {}", "no_tool"),
        ("Thought: t\nAction: add", "no_input"),
        ("Thought: t\nFinal Answer:   ", "empty_answer"),
    ],
)
def test_format_errors_carry_a_correction(text: str, kind: str) -> None:
    with pytest.raises(FormatError) as info:
        parse(text, tool_names="add, ask_user")
    assert info.value.kind == kind
    message = str(info.value)
    assert message.startswith("Invalid format") and ("Final Answer" in message or "Action" in message)


def test_french_and_japanese_packs_read_their_labels_and_english() -> None:
    fr = parse('Pensée : je calcule\nAction : calculator\nEntrée de l\'action : {"expression": "1+1"}', "fr")
    assert isinstance(fr, Action) and fr.input == {"expression": "1+1"}
    assert isinstance(parse("Pensée : fini\nRéponse finale : 2", "fr"), FinalAnswer)
    assert isinstance(parse("Thought: done\nFinal Answer: 2", "fr"), FinalAnswer)
    ja = parse('思考：計算する\n行動：calculator\n行動入力：{"expression": "1+1"}', "ja")
    assert isinstance(ja, Action) and ja.tool == "calculator"
    final = parse("思考：わかった\n最終回答：2", "ja")
    assert isinstance(final, FinalAnswer) and final.answer == "2"
    with pytest.raises(FormatError) as info:
        parse("ただの文章", "ja")
    assert "形式" in str(info.value)


def test_action_none_followed_by_final_answer() -> None:
    step = parse("Thought: no tool needed\nAction: None\nFinal Answer: hello")
    assert isinstance(step, FinalAnswer) and step.answer == "hello"


def test_a_final_answer_keeps_lines_that_only_look_like_labels() -> None:
    step = parse(
        "Thought: done\nFinal Answer: Steps:\n1. Action: call the bank\n2. Input: your PIN\n- Thought: be calm"
    )
    assert isinstance(step, FinalAnswer)
    assert step.answer == "Steps:\n1. Action: call the bank\n2. Input: your PIN\n- Thought: be calm"
    step = parse("Thought: t\nFinal Answer: 42\nThought: hmm\nAction: search\nAction Input: {}")
    assert isinstance(step, FinalAnswer) and step.answer == "42"


# ------------------------------------------------------- the formats real models write


def test_numbered_labels_of_the_react_paper() -> None:
    step = parse("Thought 3: I need the elevation.\nAction 3: Search[High Plains]\nObservation 3: imagined")
    assert isinstance(step, Action) and (step.tool, step.input) == ("Search", "High Plains")
    assert step.thought == "I need the elevation."
    step = parse('**Thought 12:** t\n**Action 12:** add\n**Action Input 12:** {"a": 1}')
    assert isinstance(step, Action) and step.input == {"a": 1}


@pytest.mark.parametrize(
    "text",
    [
        "Thought: done\nAction: Finish[1,800 to 7,000 ft]",
        "Thought 5: done\nAction 5: Finish[1,800 to 7,000 ft]",
        "Thought: done\nAction: Final Answer\nAction Input: 1,800 to 7,000 ft",
        'Thought: done\nAction: final_answer\nAction Input: "1,800 to 7,000 ft"',
    ],
)
def test_finish_is_the_final_answer(text: str) -> None:
    step = parse(text, tool_names="Search, Lookup")
    assert isinstance(step, FinalAnswer) and step.answer == "1,800 to 7,000 ft" and step.thought == "done"


def test_a_tool_named_finish_is_a_tool() -> None:
    step = parse("Thought: close it\nAction: Finish[ticket 4]", tool_names="Search, Finish")
    assert isinstance(step, Action) and step.tool == "Finish" and step.input == "ticket 4"


def test_an_empty_finish_is_a_format_error() -> None:
    with pytest.raises(FormatError) as info:
        parse("Thought: done\nAction: Finish[ ]")
    assert info.value.kind == "empty_answer"


@pytest.mark.parametrize(
    "text",
    [
        'Thought: t\nAction:\n```\n{"action": "add", "action_input": {"a": 1}}\n```',
        'Thought: t\nAction:\n```json\n{\n  "action": "add",\n  "action_input": {"a": 1}\n}\n```',
        'Thought: t\nAction: {"action": "add", "action_input": {"a": 1}}',
        'Thought: t\n```json\n{"action": "add", "action_input": {"a": 1}}\n```',
        '```json\n{"action": "add", "action_input": {"a": 1}}\n```',
        "Thought: t\nAction:\n```\n{'action': 'add', 'action_input': {'a': 1},}\n```",
    ],
)
def test_json_action_blobs(text: str) -> None:
    step = parse(text)
    assert isinstance(step, Action) and (step.tool, step.input) == ("add", {"a": 1})
    assert step.thought in ("t", "")


def test_a_json_blob_whose_action_is_final_answer_is_the_answer() -> None:
    step = parse('Thought: I know\nAction:\n```json\n{"action": "Final Answer", "action_input": "It is 4."}\n```')
    assert isinstance(step, FinalAnswer) and step.answer == "It is 4." and step.thought == "I know"


def test_json_in_a_thought_without_both_blob_keys_is_not_an_action() -> None:
    with pytest.raises(FormatError) as info:
        parse('Thought: the user sent {"action": "dance"} as data')
    assert info.value.kind == "no_decision"


def test_reasoning_blocks_are_neither_thoughts_nor_actions() -> None:
    text = (
        '<think>\nMaybe Action: wrong\nAction Input: {"a": 0}\nFinal Answer: 0\n</think>\n'
        'Thought: right\nAction: add\nAction Input: {"a": 1}'
    )
    step = parse(text)
    assert isinstance(step, Action) and step.input == {"a": 1} and step.thought == "right"
    assert "<think>" not in step.raw and "wrong" not in step.raw


def test_a_reasoning_block_the_template_opened_ends_at_its_closing_tag() -> None:
    step = parse("so the answer is 3? Final Answer: 3\n</think>\n\nThought: checked\nFinal Answer: 4")
    assert isinstance(step, FinalAnswer) and step.answer == "4" and step.thought == "checked"


def test_an_unclosed_reasoning_block_hides_everything_after_it() -> None:
    with pytest.raises(FormatError) as info:
        parse('<think>\nThought: t\nAction: add\nAction Input: {"a": 1}\nand then')
    assert info.value.kind == "no_label"
    step = parse("Thought: t\nFinal Answer: 5\n<think>an afterthought")
    assert isinstance(step, FinalAnswer) and step.answer == "5"
