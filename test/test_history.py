"""``_history``: tool messages appended in bulk equal what TorchRL's ``History.extend`` gives."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Sequence

import pytest
from tensordict import TensorDict
from torchrl.data.llm import History
from torchrl.envs.llm import ChatEnv

from torchrl_agentic import ToolResponseText, tool_call_id, tool_call_ids
from torchrl_agentic._history import (
    PAD_ROLE,
    _per_item_layout,
    _time_stacked_layout,
    append_messages,
    newest_messages,
)
from torchrl_agentic.testing import ScriptedPolicy

# histories are built from lists: test/conftest.py sets tensordict.set_list_to_stack(True)

BATCH = 3
Rows = Sequence[Sequence[tuple[str, str]]]


def table(history: History) -> list[list[tuple[str, str]]]:
    """(role, content) of every message, per item."""
    return [list(zip(list(r), list(c))) for r, c in zip(history.role, history.content)]


def reference(prompt: History, rows: Rows) -> History:
    """What TorchRL's own ``History.extend`` gives, with ``<none>`` padding."""
    width = max(len(r) for r in rows)
    padded = [list(r) + [(PAD_ROLE, "")] * (width - len(r)) for r in rows]
    new = History(
        role=[[role for role, _ in r] for r in padded],
        content=[[content for _, content in r] for r in padded],
        batch_size=(len(padded), width),
    )
    return prompt.extend(new, inplace=False, dim=-1)


def reply(text: str, call: str) -> ToolResponseText:
    return ToolResponseText(text, tool_call_id=call, name="echo")


def env_and_reset() -> tuple[ChatEnv, TensorDict]:
    env = ChatEnv(batch_size=(BATCH,))
    td = env.reset(TensorDict(query=[f"q{i}" for i in range(BATCH)], batch_size=(BATCH,)))
    return env, td


def policy_reply(td: TensorDict) -> TensorDict:
    return ScriptedPolicy([[f"answer {i}"] for i in range(BATCH)])(td)


def response_1d() -> History:
    return History(
        role=["assistant"] * BATCH,
        content=[f"answer {i}" for i in range(BATCH)],
        batch_size=(BATCH,),
    )


def after_reset() -> History:
    return env_and_reset()[1]["history"].prompt


def after_step() -> History:
    env, td = env_and_reset()
    return env.step(policy_reply(td))["next"]["history"].prompt


def policy_full() -> History:
    """The ``full`` history as a policy builds it (before ChatEnv stores it in the tensordict)."""
    response = History(
        role=[["assistant"]] * BATCH, content=[[f"answer {i}"] for i in range(BATCH)],
        batch_size=(BATCH, 1),
    )
    return after_reset().extend(response, inplace=False, dim=-1)


def stored_policy_full() -> History:
    return policy_reply(env_and_reset()[1])["history"].full


def appended_full() -> History:
    prompt = after_reset()
    return prompt.append(response_1d(), inplace=False, dim=-1)


def after_step_with_appended_full() -> History:
    env, td = env_and_reset()
    history = td["history"]
    history.full = history.prompt.append(response_1d(), inplace=False, dim=-1)
    history.response = History(
        role=[["assistant"]] * BATCH, content=[[f"answer {i}"] for i in range(BATCH)],
        batch_size=(BATCH, 1),
    )
    td.set("history", history)
    return env.step(td)["next"]["history"].prompt


def dense() -> History:
    return History(
        role=[["user", "assistant"]] * BATCH,
        content=[[f"q{i}", f"answer {i}"] for i in range(BATCH)],
        batch_size=(BATCH, 2),
    )


PER_ITEM, TIME_STACKED, FALLBACK = "per_item", "time_stacked", "fallback"
LAYOUTS: dict[str, tuple[Callable[[], History], str]] = {
    "chatenv_reset": (after_reset, PER_ITEM),
    "chatenv_step": (after_step, PER_ITEM),
    "policy_full_extend": (policy_full, TIME_STACKED),
    "policy_full_stored": (stored_policy_full, PER_ITEM),
    "policy_full_append": (appended_full, FALLBACK),
    "chatenv_step_after_append": (after_step_with_appended_full, FALLBACK),
    "dense_history": (dense, FALLBACK),
}


def layout_of(history: History) -> str:
    td = history._tensordict
    if _per_item_layout(td):
        return PER_ITEM
    if _time_stacked_layout(td):
        return TIME_STACKED
    return FALLBACK


@pytest.fixture(params=sorted(LAYOUTS))
def prompt(request) -> History:
    build, expected = LAYOUTS[request.param]
    history = build()
    assert layout_of(history) == expected, "the case no longer exercises the layout it names"
    return history


ROWS: list[list[tuple[str, str]]] = [
    [("tool", reply("r0", "call_0")), ("tool", reply("r1", "call_1"))],
    [("tool", reply("only", "call_0"))],
    [],
]


class TestToolResponseText:
    def test_is_an_equal_str(self):
        text = ToolResponseText("42", tool_call_id="call_0", name="calc")
        assert isinstance(text, str) and text == "42" and "42" == text
        assert hash(text) == hash("42") and {"42": 1}[text] == 1
        assert str(text) == "42" and type(str(text)) is str

    def test_attributes(self):
        text = ToolResponseText("boom", tool_call_id="call_3", name="calc", is_error=True)
        assert (text.tool_call_id, text.name, text.is_error) == ("call_3", "calc", True)
        plain = ToolResponseText("ok", tool_call_id="call_4")
        assert (plain.name, plain.is_error) == ("", False)

    @pytest.mark.parametrize(
        "roundtrip", [lambda t: pickle.loads(pickle.dumps(t)), copy.deepcopy, copy.copy]
    )
    def test_copies_keep_the_id(self, roundtrip):
        text = ToolResponseText("42", tool_call_id="call_7", name="calc", is_error=True)
        back = roundtrip(text)
        assert type(back) is ToolResponseText and back == "42"
        assert (back.tool_call_id, back.name, back.is_error) == ("call_7", "calc", True)

    def test_repr(self):
        text = ToolResponseText("it's", tool_call_id="call_0")
        assert repr(text) == "ToolResponseText(\"it's\", tool_call_id='call_0')"

    def test_tool_call_id(self):
        assert tool_call_id(reply("x", "call_5")) == "call_5"
        assert tool_call_id("plain") is None and tool_call_id(None) is None


class TestAppendMessages:
    def test_same_messages_as_history_extend(self, prompt):
        out = append_messages(prompt, ROWS)
        expected = reference(prompt, ROWS)
        assert tuple(out.batch_size) == tuple(expected.batch_size)
        assert table(out) == table(expected)
        assert tool_call_ids(out) == tool_call_ids(expected)

    def test_input_is_not_modified(self, prompt):
        before = table(prompt)
        shape = tuple(prompt.batch_size)
        out = append_messages(prompt, ROWS)
        out.extend(reference(out, [[("user", "more")]] * BATCH)[:, -1:], inplace=True, dim=-1)
        assert table(prompt) == before and tuple(prompt.batch_size) == shape

    def test_ragged_rows_are_padded_with_none_role(self, prompt):
        length = prompt.batch_size[1]
        out = append_messages(prompt, ROWS)
        assert out.batch_size[1] == length + 2
        new = [row[length:] for row in table(out)]
        assert new == [
            [("tool", "r0"), ("tool", "r1")],
            [("tool", "only"), (PAD_ROLE, "")],
            [(PAD_ROLE, ""), (PAD_ROLE, "")],
        ]
        assert [ids[length:] for ids in tool_call_ids(out)] == [
            ["call_0", "call_1"], ["call_0", None], [None, None]
        ]

    def test_appending_twice(self, prompt):
        second = [[("tool", reply("again", "call_9"))], [], [("tool", reply("z", "call_2"))]]
        out = append_messages(append_messages(prompt, ROWS), second)
        expected = reference(reference(prompt, ROWS), second)
        assert table(out) == table(expected)
        assert tool_call_ids(out) == tool_call_ids(expected)

    def test_no_messages_returns_the_input(self, prompt):
        assert append_messages(prompt, [[] for _ in range(BATCH)]) is prompt

    def test_rows_must_match_the_batch(self, prompt):
        with pytest.raises(ValueError, match=r"needs a \(B, T\) history and B rows, .* and 2 rows"):
            append_messages(prompt, ROWS[:2])

    def test_history_must_be_two_dimensional(self):
        flat = History(role=["user"], content=["hi"], batch_size=(1,))
        with pytest.raises(ValueError, match=r"got history of shape \(1,\) and 1 rows"):
            append_messages(flat, [[("tool", "x")]])


class TestNewestMessages:
    def test_last_message_of_every_item(self, prompt):
        newest = newest_messages(prompt)
        assert [(m["role"], m["content"]) for m in newest] == [row[-1] for row in table(prompt)]

    def test_after_append_includes_padding(self, prompt):
        newest = newest_messages(append_messages(prompt, ROWS))
        assert [(m["role"], m["content"]) for m in newest] == [
            ("tool", "r1"), (PAD_ROLE, ""), (PAD_ROLE, "")
        ]
        assert tool_call_id(newest[0]["content"]) == "call_1"


class TestToolCallIds:
    def test_nested_like_content(self):
        history = History(
            role=[["user", "tool"], ["user", "tool"]],
            content=[["a", reply("b", "call_0")], ["c", reply("d", "call_1")]],
            batch_size=(2, 2),
        )
        assert tool_call_ids(history) == [[None, "call_0"], [None, "call_1"]]

    def test_one_dimensional(self):
        content = ["a", reply("b", "call_0")]
        history = History(role=["user", "tool"], content=content, batch_size=(2,))
        assert tool_call_ids(history) == [None, "call_0"]

    def test_survives_indexing(self):
        out = append_messages(after_step(), ROWS)
        assert tool_call_ids(out[0]) == [None, None, "call_0", "call_1"]
        assert tool_call_id(out[1, 2].content) == "call_0"
