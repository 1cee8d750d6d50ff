"""ToolCompose inside a real TransformedEnv(ChatEnv(...)): the behaviours of the core issue."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
import torch
from chat_helpers import hermes, queries
from tensordict import TensorDict
from torchrl.data import Composite
from torchrl.envs import Compose, TransformedEnv
from torchrl.envs.llm import ChatEnv

from torchrl_agentic import (
    ConfigError,
    HermesParser,
    ParseResult,
    RateLimiter,
    StopTool,
    Tool,
    ToolCompose,
    ToolContext,
    ToolError,
    ToolResult,
    tool_call_id,
)
from torchrl_agentic.testing import CounterTool, EchoTool, RaisingTool, ScriptedPolicy, SleepTool


def step(env: TransformedEnv, texts: list[str], shape: tuple[int, ...] = (2,)) -> TensorDict:
    """Reset, let a scripted policy write ``texts`` (one per flat item), step once."""
    td = env.reset(queries(shape))
    td = ScriptedPolicy([[t] for t in texts])(td)
    return env.step(td)["next"]


def tool_messages(next_td: TensorDict, item: int) -> list[tuple[str, str, str | None]]:
    prompt = next_td["history"].prompt[item]
    return [
        (r, str(c), tool_call_id(c))
        for r, c in zip(prompt.role, prompt.content)
        if r not in ("user", "assistant", "system", "<none>")
    ]


class CountingParser(HermesParser):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[Any] = []

    def parse(self, message: Any) -> ParseResult:
        self.seen.append(message)
        return super().parse(message)


class TestParsing:
    def test_only_newest_message_parsed_once_per_item(self, make_env):
        parser = CountingParser()
        env = make_env([EchoTool()], batch_size=(3,), parser=parser)
        td = env.reset(queries((3,)))
        policy = ScriptedPolicy(lambda i, turn: hermes("echo", text=f"{i}-{turn}"))
        for _ in range(2):
            td = policy(td)
            td = env.step(td)["next"]
        # two steps x three items, each newest assistant message parsed exactly once
        assert len(parser.seen) == 6
        assert [m["content"] for m in parser.seen[3:]] == [hermes("echo", text=f"{i}-1") for i in range(3)]
        assert all(m["role"] == "assistant" for m in parser.seen)

    def test_non_policy_messages_are_never_parsed(self, make_env):
        echo = EchoTool()
        parser = CountingParser()
        env = make_env([echo], parser=parser)
        td = env.reset(queries((2,)))
        td = ScriptedPolicy([[hermes("echo", text="x")]] * 2, role="user")(td)
        out = env.step(td)["next"]
        assert parser.seen == [] and echo.contexts == []
        assert not out["agentic", "any_tool_calls"].any()

    def test_tool_output_that_looks_like_a_call_is_not_run(self, make_env):
        echo = EchoTool()
        env = make_env([echo], batch_size=(1,))
        td = env.reset(queries((1,)))
        policy = ScriptedPolicy([[hermes("echo", text=hermes("echo", text="inner")), "thanks"]])
        td = env.step(policy(td))["next"]
        td = env.step(policy(td))["next"]
        assert [c.call_id for c in echo.contexts] == ["call_0"]
        assert not td["agentic", "any_tool_calls"].any()


class TestConcurrency:
    def test_three_sleeps_in_one_message_overlap(self, make_env):
        sleep = SleepTool(seconds=0.5)
        env = make_env([sleep], batch_size=(1,))
        td = env.reset(queries((1,)))
        td = ScriptedPolicy([[hermes("sleep") * 3]])(td)
        start = time.monotonic()
        env.step(td)
        assert time.monotonic() - start < 0.9
        assert sleep.max_in_flight == 3

    def test_all_items_run_concurrently(self, make_env):
        sleep = SleepTool(seconds=0.3)
        env = make_env([sleep], batch_size=(4,))
        start = time.monotonic()
        step(env, [hermes("sleep") * 2] * 4, (4,))
        assert time.monotonic() - start < 0.55 + 0.3
        assert sleep.max_in_flight == 8

    def test_step_inside_running_event_loop(self, make_env):
        env = make_env([SleepTool(seconds=0.01)], batch_size=(2,))

        async def main() -> TensorDict:
            return step(env, [hermes("sleep"), hermes("sleep")])

        out = asyncio.run(main())
        assert out["agentic", "any_tool_calls"].all()

    def test_one_loop_thread_persists_across_steps(self, make_env):
        loops: set[int] = set()

        class LoopTool(Tool):
            name = "loop"
            description = "report the loop"
            input_schema = {"type": "object"}

            async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
                loops.add(id(asyncio.get_running_loop()))
                return ToolResult.from_text(threading.current_thread().name)

        env = make_env([LoopTool()], batch_size=(2,))
        td = env.reset(queries((2,)))
        policy = ScriptedPolicy(lambda i, turn: hermes("loop"))
        for _ in range(3):
            td = env.step(policy(td))["next"]
        assert len(loops) == 1
        assert tool_messages(td, 0)[0][1].startswith("ToolCompose")


class TestResults:
    def test_results_in_call_order_with_ids(self, make_env):
        env = make_env([SleepTool()], batch_size=(1,))
        text = "".join(hermes("sleep", seconds=s, tag=str(i)) for i, s in enumerate([0.3, 0.0, 0.15]))
        out = step(env, [text], (1,))
        msgs = tool_messages(out, 0)
        assert [m[1] for m in msgs] == ["slept 0.3s 0", "slept 0s 1", "slept 0.15s 2"]
        assert [m[2] for m in msgs] == ["call_0", "call_1", "call_2"]
        assert [m[0] for m in msgs] == ["tool"] * 3
        assert env.transform.last_dispatch[0].call_ids == ("call_0", "call_1", "call_2")

    def test_ragged_calls_keep_every_message(self, make_env):
        env = make_env([EchoTool()], batch_size=(3,))
        texts = [
            "".join(hermes("echo", text=f"a{i}") for i in range(3)),
            "no tools here",
            hermes("echo", text="c0"),
        ]
        out = step(env, texts, (3,))
        assert [m[1] for m in tool_messages(out, 0)] == ["a0", "a1", "a2"]
        assert tool_messages(out, 1) == []
        assert [m[1] for m in tool_messages(out, 2)] == ["c0"]
        assert out["agentic", "any_tool_calls"].tolist() == [True, False, True]
        roles = out["history"].prompt[1].role
        assert roles[:2] == ["user", "assistant"] and set(roles[2:]) <= {"<none>"}

    def test_placeholders_dropped_by_chat_template(self, make_env, tiny_tokenizer):
        env = make_env([EchoTool()], batch_size=(2,))
        out = step(env, [hermes("echo", text="one") + hermes("echo", text="two"), "plain"])
        rendered = out["history"].prompt.apply_chat_template(
            tokenizer=tiny_tokenizer, chat_template_name="qwen", add_generation_prompt=False
        )
        assert "<none>" not in rendered[1] and "tool_response" not in rendered[1]
        assert rendered[0].count("<tool_response>") == 2
        assert rendered[0].index("one") < rendered[0].index("two")

    def test_call_ids_survive_stacking_indexing_and_templates(self, make_env):
        env = make_env([EchoTool()], batch_size=(2,))
        policy = ScriptedPolicy(lambda i, turn: hermes("echo", text=f"{i}{turn}") * (i + 1))
        rollout = env.rollout(2, policy, tensordict=queries((2,)), auto_reset=True)
        prompt = rollout["next", "history"][:, -1].prompt  # stacked over time, then indexed
        item1 = prompt[1]
        ids = [tool_call_id(c) for r, c in zip(item1.role, item1.content) if r == "tool"]
        assert ids == ["call_0", "call_1", "call_0", "call_1"]
        messages = item1.tolist()
        assert [tool_call_id(m["content"]) for m in messages if m["role"] == "tool"] == ids
        template = (
            "{% for m in messages %}{% if m.role == 'tool' %}[{{ m.content.tool_call_id }}]"
            "{% endif %}{% endfor %}"
        )
        from jinja2 import Template

        assert Template(template).render(messages=messages) == "[call_0][call_1][call_0][call_1]"


class TestFailureIsolation:
    @pytest.mark.parametrize(
        ("call", "expected"),
        [
            (hermes("nope"), "unknown tool 'nope'; available tools: boom, echo, sleep"),
            (hermes("echo", text=3), "invalid arguments for tool 'echo': 3 is not of type 'string'"),
            (hermes("echo"), "'text' is a required property"),
            ('<tool_call>{"name": "echo", "arguments": {"text": </tool_call>', "invalid JSON in <tool_call>"),
            (hermes("boom"), "tool 'boom' failed: ValueError: bad input"),
        ],
    )
    def test_bad_call_becomes_error_for_that_call_only(self, make_env, call, expected):
        tools = [EchoTool(), SleepTool(seconds=0.0), RaisingTool(ValueError("bad input"))]
        env = make_env(tools, batch_size=(2,))
        out = step(env, [hermes("echo", text="before") + call + hermes("echo", text="after"),
                         hermes("echo", text="fine")])
        msgs = tool_messages(out, 0)
        assert [m[1] for m in msgs][::2] == ["before", "after"]
        assert expected.lower() in msgs[1][1].lower()
        assert "Traceback" not in msgs[1][1]
        assert out["agentic", "any_error"].tolist() == [True, False]
        assert env.transform.last_dispatch[0].results[1].is_error
        assert [m[1] for m in tool_messages(out, 1)] == ["fine"]

    def test_tool_error_message_reaches_the_model(self, make_env):
        env = make_env([RaisingTool(ToolError("quota exceeded, try later"))], batch_size=(1,))
        out = step(env, [hermes("boom")], (1,))
        assert tool_messages(out, 0)[0][1] == "quota exceeded, try later"

    def test_timeout_cancels_the_call(self, make_env):
        cancelled = threading.Event()

        class Hang(Tool):
            name = "hang"
            description = "never returns"
            input_schema = {"type": "object"}

            async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise
                return ToolResult.from_text("late")

        env = make_env([Hang(), EchoTool()], batch_size=(1,), per_call_timeout=0.2)
        start = time.monotonic()
        out = step(env, [hermes("hang") + hermes("echo", text="ok")], (1,))
        assert time.monotonic() - start < 5
        msgs = tool_messages(out, 0)
        assert msgs[0][1] == "tool 'hang' timed out after 0.2 s and was cancelled"
        assert msgs[1][1] == "ok"
        assert cancelled.wait(2)

    def test_timeout_counts_rate_limiter_wait(self, make_env):
        limiter = RateLimiter(max_concurrent=1)
        env = make_env([SleepTool(seconds=0.3)], batch_size=(1,), per_call_timeout=0.45,
                       rate_limits={"sleep": limiter})
        out = step(env, [hermes("sleep") * 2], (1,))
        msgs = tool_messages(out, 0)
        assert msgs[0][1] == "slept 0.3s"
        assert "timed out after 0.45 s" in msgs[1][1]
        assert limiter.in_flight == 0

    def test_calls_beyond_max_calls_per_step_get_errors(self, make_env):
        echo = EchoTool()
        env = make_env([echo], batch_size=(1,), max_calls_per_step=2)
        out = step(env, ["".join(hermes("echo", text=str(i)) for i in range(4))], (1,))
        msgs = tool_messages(out, 0)
        assert len(msgs) == 4 and len(echo.contexts) == 2
        assert [m[1] for m in msgs[:2]] == ["0", "1"]
        assert all("at most 2 tool call(s) per step" in m[1] for m in msgs[2:])
        assert [m[2] for m in msgs] == ["call_0", "call_1", "call_2", "call_3"]


class TestFlags:
    def test_flags_declared_in_spec_and_false_after_reset(self, make_env):
        env = make_env([StopTool()], batch_size=(3,))
        spec = env.observation_spec["agentic"]
        assert isinstance(spec, Composite)
        for key in ("any_tool_calls", "any_error", "stop_requested"):
            assert spec[key].dtype == torch.bool and spec[key].shape == (3,)
        td = env.reset(queries((3,)))
        for key in ("any_tool_calls", "any_error", "stop_requested"):
            assert td["agentic", key].tolist() == [False] * 3

    def test_stop_tool_ends_only_that_item(self, make_env):
        env = make_env([StopTool(), EchoTool()], batch_size=(2,))
        out = step(env, [hermes("stop", reason="solved"), hermes("echo", text="go on")])
        assert out["agentic", "stop_requested"].tolist() == [True, False]
        assert out["done"].squeeze(-1).tolist() == [True, False]
        assert out["terminated"].squeeze(-1).tolist() == [True, False]
        assert tool_messages(out, 0)[0][1] == "stopping: solved"
        assert env.transform.last_dispatch[0].stop_requested


class TestSessions:
    def test_state_is_per_trajectory(self, make_env):
        env = make_env([CounterTool()], batch_size=(2,))
        out = step(env, [hermes("count") * 2, hermes("count")])
        assert [m[1] for m in tool_messages(out, 0)] == ["1", "2"]
        assert [m[1] for m in tool_messages(out, 1)] == ["1"]

    def test_partial_reset_releases_that_item_only(self, make_env):
        counter = CounterTool()
        env = make_env([counter], batch_size=(3,))
        step(env, [hermes("count")] * 3, (3,))
        # TorchRL 0.14.1's ChatEnv cannot merge a partial reset of ragged histories, so drive the
        # transform's reset hook the way TransformedEnv does, with the "_reset" mask.
        mask = TensorDict(_reset=torch.tensor([[False], [True], [False]]), batch_size=(3,))
        env.transform._reset(mask, TensorDict(batch_size=(3,)))
        assert counter.released == [1]
        assert env.transform.sessions.active() == [0, 2]
        env.reset(queries((3,)))
        assert sorted(counter.released) == [0, 1, 2]
        assert env.transform.sessions.active() == []

    def test_new_episode_starts_fresh_state(self, make_env):
        env = make_env([CounterTool()], batch_size=(2,))
        step(env, [hermes("count") * 2, hermes("count")])
        out = step(env, [hermes("count"), "none"])
        assert [m[1] for m in tool_messages(out, 0)] == ["1"]

    def test_multi_dim_batch(self, make_env):
        counter = CounterTool()
        env = make_env([counter, EchoTool()], batch_size=(2, 2))
        texts = [hermes("count"), hermes("count") * 2, "none", hermes("echo", text="e")]
        out = step(env, texts, (2, 2))
        assert out["agentic", "any_tool_calls"].tolist() == [[True, True], [False, True]]
        prompt = out["history"].prompt
        assert [str(c) for r, c in zip(prompt[0, 1].role, prompt[0, 1].content) if r == "tool"] == ["1", "2"]
        assert [str(c) for r, c in zip(prompt[1, 1].role, prompt[1, 1].content) if r == "tool"] == ["e"]
        assert env.transform.sessions.active() == [0, 1, 3]  # items that made calls


class TestState:
    @pytest.mark.parametrize("passed", [True, False])
    def test_state_reaches_tools_that_ask(self, make_env, passed):
        wants, ignores = EchoTool("wants", wants_state=True), EchoTool("ignores")
        env = make_env([wants, ignores], batch_size=(2,), pass_state_to_tools=passed)
        step(env, [hermes("wants", text="a") + hermes("ignores", text="b"), "nothing"])
        assert ignores.contexts[0].state is None
        state = wants.contexts[0].state
        if not passed:
            assert state is None
            return
        assert "history" not in state.keys() and state["query"] == "question 0"
        assert wants.contexts[0].batch_index == 0


class TestLifecycle:
    def test_close_leaves_no_thread(self, no_thread_leak):
        compose = ToolCompose(tools=[SleepTool(seconds=0.01)], parser=HermesParser())
        env = TransformedEnv(ChatEnv(batch_size=(2,)), compose)
        step(env, [hermes("sleep"), hermes("sleep")])
        assert compose._loop.running
        env.close()
        assert not compose._loop.running

    def test_close_releases_sessions_and_tears_down(self):
        events: list[str] = []

        class Life(CounterTool):
            async def setup(self) -> None:
                events.append("setup")

            async def teardown(self) -> None:
                events.append("teardown")

        with ToolCompose(tools=[Life()], parser=HermesParser()) as compose:
            env = TransformedEnv(ChatEnv(batch_size=(2,)), compose)
            step(env, [hermes("count"), hermes("count")])
        assert events == ["setup", "teardown"]
        assert sorted(compose["count"].released) == [0, 1]
        with pytest.raises(RuntimeError, match="closed"):
            env.reset(queries((2,)))

    def test_clone_is_independent_but_shares_limiter(self, make_env):
        limiter = RateLimiter(max_concurrent=4)
        env = make_env([CounterTool()], batch_size=(2,), rate_limits={"count": limiter})
        step(env, [hermes("count"), hermes("count")])
        clone = env.transform.clone()
        try:
            assert clone.rate_limits["count"] is limiter
            assert clone["count"] is not env.transform["count"]
            assert clone.sessions is not env.transform.sessions and len(clone.sessions) == 0
            env2 = TransformedEnv(ChatEnv(batch_size=(2,)), clone)
            out = step(env2, [hermes("count"), "x"])
            assert tool_messages(out, 0)[0][1] == "1"
            assert clone._loop.loop is not env.transform._loop.loop
        finally:
            clone.close()


class TestContainer:
    def test_lookup_and_membership(self):
        stop, echo = StopTool(), EchoTool()
        compose = ToolCompose(tools=[stop, echo], parser=HermesParser())
        assert compose["stop"] is stop and compose[1] is echo
        assert "echo" in compose and "python" not in compose and len(compose) == 2
        assert [t.name for t in compose] == ["stop", "echo"]
        with pytest.raises(KeyError, match="no tool named 'python'; available tools: stop, echo"):
            compose["python"]

    @pytest.mark.parametrize("how", ["append", "insert", "setitem", "init"])
    def test_non_tool_is_a_type_error(self, how):
        compose = ToolCompose(tools=[EchoTool()], parser=HermesParser())
        bad = Compose()
        with pytest.raises(TypeError, match="ToolCompose holds Tool objects, got Compose"):
            if how == "append":
                compose.append(bad)
            elif how == "insert":
                compose.insert(0, bad)
            elif how == "setitem":
                compose[0] = bad
            else:
                ToolCompose(tools=[bad], parser=HermesParser())

    def test_duplicate_names_are_a_value_error(self):
        with pytest.raises(ValueError, match="duplicate tool name 'echo'"):
            ToolCompose(tools=[EchoTool(), EchoTool()], parser=HermesParser())
        compose = ToolCompose(tools=[EchoTool()], parser=HermesParser())
        with pytest.raises(ValueError, match="duplicate tool name 'echo'"):
            compose.append(EchoTool())

    def test_append_insert_setitem(self):
        compose = ToolCompose(tools=[EchoTool()], parser=HermesParser())
        compose.append(StopTool())
        compose.insert(0, CounterTool())
        assert [t.name for t in compose] == ["count", "echo", "stop"]
        compose["echo"] = EchoTool()
        compose[0] = SleepTool()
        assert [t.name for t in compose] == ["sleep", "echo", "stop"]
        with pytest.raises(ValueError, match=r"compose\['echo'\] = tool needs tool.name == 'echo'"):
            compose["echo"] = CounterTool()

    @pytest.mark.parametrize(
        ("kwargs", "error", "match"),
        [
            ({"max_calls_per_step": 0}, ValueError, "max_calls_per_step must be >= 1, got 0"),
            ({"per_call_timeout": -1}, ValueError, "per_call_timeout must be > 0 seconds, got -1"),
            ({"per_call_timeout": "5"}, TypeError, "per_call_timeout must be a number"),
            ({"rate_limits": {"nope": RateLimiter()}}, ValueError, "rate_limits names unknown tool 'nope'"),
            ({"rate_limits": {"echo": 3}}, TypeError, r"rate_limits\['echo'\] must be a RateLimiter"),
            ({"parser": "hermes"}, TypeError, "parser must implement parse"),
            ({"tool_role": ""}, ValueError, "tool_role must be a non-empty str"),
        ],
    )
    def test_misuse_raises_at_construction(self, kwargs, error, match):
        kwargs.setdefault("parser", HermesParser())
        with pytest.raises(error, match=match) as raised:
            ToolCompose(tools=[EchoTool()], **kwargs)
        assert isinstance(raised.value, ConfigError) == (error is ValueError)

    def test_tool_schemas_and_render_tools(self):
        compose = ToolCompose(tools=[EchoTool(), StopTool()], parser=HermesParser())
        schemas = compose.tool_schemas()
        assert [s["function"]["name"] for s in schemas] == ["echo", "stop"]
        assert '"name": "echo"' in compose.render_tools()


class TestCopy:
    def test_deepcopy_and_pickle_give_independent_composes(self, make_env):
        import copy
        import pickle

        env = make_env([CounterTool()], batch_size=(2,))
        step(env, [hermes("count"), hermes("count")])
        original = env.transform
        for twin in (copy.deepcopy(original), pickle.loads(pickle.dumps(original))):
            try:
                assert twin is not original and [t.name for t in twin] == ["count"]
                assert twin._loop is not original._loop and len(twin.sessions) == 0
                out = step(TransformedEnv(ChatEnv(batch_size=(2,)), twin), [hermes("count"), "x"])
                assert tool_messages(out, 0)[0][1] == "1"
            finally:
                twin.close()
        assert len(original.sessions) == 2


class TestEnvChecks:
    def test_text_mode_chat_env_is_refused_with_the_fix(self):
        env = TransformedEnv(
            ChatEnv(batch_size=(1,), input_mode="text"),
            ToolCompose(tools=[EchoTool()], parser=HermesParser()),
        )
        try:
            with pytest.raises(RuntimeError, match="needs a ChatEnv in history mode, got input_mode='text'"):
                env.transform._step(TensorDict(batch_size=(1,)), TensorDict(batch_size=(1,)))
        finally:
            env.close()


class TestSharedLimiter:
    def test_one_limiter_caps_two_envs_stepping_in_threads(self):
        limiter = RateLimiter(max_concurrent=2)
        lock = threading.Lock()
        state = {"now": 0, "peak": 0}

        class Tracked(Tool):
            name = "tracked"
            description = "sleep while counted"
            input_schema = {"type": "object"}

            async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
                with lock:
                    state["now"] += 1
                    state["peak"] = max(state["peak"], state["now"])
                await asyncio.sleep(0.05)
                with lock:
                    state["now"] -= 1
                return ToolResult.from_text("done")

        first = ToolCompose(tools=[Tracked()], parser=HermesParser(), rate_limits={"tracked": limiter})
        second = first.clone()
        envs = [TransformedEnv(ChatEnv(batch_size=(2,)), c) for c in (first, second)]
        outs: list[TensorDict] = []

        def work(env: TransformedEnv) -> None:
            outs.append(step(env, [hermes("tracked") * 3] * 2))

        threads = [threading.Thread(target=work, args=(env,)) for env in envs]
        try:
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
        finally:
            for env in envs:
                env.close()
        assert len(outs) == 2 and state["peak"] == 2
        assert all(tool_messages(o, i)[k][1] == "done" for o in outs for i in range(2) for k in range(3))
        assert limiter.in_flight == 0 and limiter.total_acquired == 12
