"""Group ``agentic-dispatch``: one env step of tool calls, ToolCompose beside TorchRL's baselines.

Run the figures with ``pytest benchmarks --benchmark-enable``; the test suite runs each once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

import pytest
import tensordict
from tensordict import TensorDict
from torchrl.envs import TransformedEnv
from torchrl.envs.llm import ChatEnv
from torchrl.envs.llm.transforms import ExecuteToolsInOrder, ToolRegistry, XMLBlockParser

from torchrl_agentic import HermesParser, Tool, ToolCompose, ToolContext, ToolResult
from torchrl_agentic.testing import ScriptedPolicy, SleepTool

tensordict.set_list_to_stack(True).set()

GROUP = "agentic-dispatch"


class NoopTool(Tool):
    name = "noop"
    description = "Do nothing."
    input_schema = {"type": "object", "properties": {"i": {"type": "integer"}}}

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.from_text("ok")


class SleepService:
    """A legacy ExecuteToolsInOrder service doing the same work as SleepTool."""

    name = "sleep"
    schema_in = {"seconds": float}
    schema_out = {"slept": float}

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        time.sleep(self.seconds)
        return {"slept": self.seconds}


def hermes_calls(name: str, count: int) -> str:
    return "".join(
        f'<tool_call>{json.dumps({"name": name, "arguments": {"i": i} if name == "noop" else {}})}'
        "</tool_call>"
        for i in range(count)
    )


def prepared(env: TransformedEnv | ChatEnv, batch: int, text: str) -> TensorDict:
    td = env.reset(TensorDict(query=["question"] * batch, batch_size=(batch,)))
    return ScriptedPolicy(lambda i, turn: text)(td)


def run_step(benchmark: Any, env: Any, td: TensorDict, rounds: int) -> None:
    benchmark.group = GROUP
    benchmark.pedantic(env.step, setup=lambda: ((td.clone(),), {}), rounds=rounds, warmup_rounds=1)


@pytest.fixture
def compose_env():
    envs: list[TransformedEnv] = []

    def make(tool: Tool, batch: int) -> TransformedEnv:
        env = TransformedEnv(ChatEnv(batch_size=(batch,)), ToolCompose(tools=[tool], parser=HermesParser()))
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


@pytest.mark.parametrize("batch", [1, 8], ids=lambda b: f"B{b}")
@pytest.mark.parametrize("calls", [1, 3, 8], ids=lambda n: f"n{n}")
def test_toolcompose_sleep_50ms(benchmark, compose_env, batch, calls):
    env = compose_env(SleepTool(seconds=0.05), batch)
    run_step(benchmark, env, prepared(env, batch, hermes_calls("sleep", calls)), rounds=10)


@pytest.mark.parametrize("batch", [1, 8], ids=lambda b: f"B{b}")
@pytest.mark.parametrize("calls", [1, 3, 8], ids=lambda n: f"n{n}")
def test_legacy_execute_tools_in_order_sleep_50ms(benchmark, batch, calls):
    transform = ExecuteToolsInOrder(registry=ToolRegistry([SleepService(0.05)]), parser=XMLBlockParser())
    env = TransformedEnv(ChatEnv(batch_size=(batch,)), transform)
    text = '<tool name="sleep">{}</tool>' * calls
    run_step(benchmark, env, prepared(env, batch, text), rounds=2)


def test_toolcompose_8x8_sleep_100ms(benchmark, compose_env):
    env = compose_env(SleepTool(seconds=0.1), 8)
    run_step(benchmark, env, prepared(env, 8, hermes_calls("sleep", 8)), rounds=10)


def test_toolcompose_64x8_noop(benchmark, compose_env):
    env = compose_env(NoopTool(), 64)
    run_step(benchmark, env, prepared(env, 64, hermes_calls("noop", 8)), rounds=50)


def test_bare_chatenv_step_64(benchmark):
    env = ChatEnv(batch_size=(64,))
    run_step(benchmark, env, prepared(env, 64, hermes_calls("noop", 8)), rounds=50)


def test_gather_512_noop_coroutines(benchmark):
    loop = asyncio.new_event_loop()

    async def noop() -> None:
        return None

    async def gather() -> None:
        await asyncio.gather(*(noop() for _ in range(512)))

    benchmark.group = GROUP
    try:
        benchmark.pedantic(lambda: loop.run_until_complete(gather()), rounds=50, warmup_rounds=2)
    finally:
        loop.close()
