"""Quickstart: a batched ChatEnv whose assistant messages call tools, run concurrently by ToolCompose.

Runs offline in seconds: the policy is scripted (it writes Hermes-style tool calls the way Qwen
models do), the tools are small local ones. Run it with:

    python tutorials/quickstart.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

import tensordict
from tensordict import TensorDict
from torchrl.envs import TransformedEnv
from torchrl.envs.llm import ChatEnv

from torchrl_agentic import (
    HermesParser,
    RateLimiter,
    StopTool,
    Tool,
    ToolCompose,
    ToolContext,
    ToolError,
    ToolResult,
    tool_call_id,
)
from torchrl_agentic.testing import ScriptedPolicy

tensordict.set_list_to_stack(True).set()


class Calculator(Tool):
    """Evaluates + - * / on two numbers."""

    name = "calculator"
    description = "Apply an arithmetic operation to two numbers."
    input_schema = {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": ["+", "-", "*", "/"]},
            "a": {"type": "number"},
            "b": {"type": "number"},
        },
        "required": ["op", "a", "b"],
    }

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        a, b, op = args["a"], args["b"], args["op"]
        if op == "/" and b == 0:
            raise ToolError("division by zero; pick a non-zero divisor")
        value = {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else 0}[op]
        return ToolResult.from_text(f"{value:g}")


class Search(Tool):
    """A stand-in for a slow remote search: 200 ms per call, rate limited."""

    name = "search"
    description = "Search a small offline encyclopedia."
    input_schema = {
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    }
    facts = {
        "paris": "Paris is the capital of France.",
        "torchrl": "TorchRL is a PyTorch library for reinforcement learning.",
        "python": "Python was first released in 1991.",
    }

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        await asyncio.sleep(0.2)
        hits = [v for k, v in self.facts.items() if k in args["query"].lower()]
        return ToolResult.from_json({"query": args["query"], "hits": hits})


class Notes(Tool):
    """Per-conversation notes: state lives in the trajectory's session, never on the tool."""

    name = "notes"
    description = "Append a note to this conversation's notebook and return all notes."
    input_schema = {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        assert ctx.session is not None
        notes = ctx.session.get("notes") or ctx.session.set("notes", [])
        notes.append(args["text"])
        return ToolResult.from_text(" | ".join(notes))


def call(name: str, **args: Any) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


SCRIPT = [
    [  # item 0: three searches at once, then an answer, then stop
        "Let me look these up." + call("search", query="Paris") + call("search", query="TorchRL")
        + call("search", query="Python"),
        "Paris, TorchRL and Python: found." + call("notes", text="answered"),
        call("stop", reason="answered"),
    ],
    [  # item 1: arithmetic, including a model mistake that becomes an error message
        call("calculator", op="*", a=6, b=7) + call("calculator", op="/", a=1, b=0),
        call("calculator", op="+", a=40, b=2),
        "The answer is 42.",
    ],
    [  # item 2: no tools at all
        "I can answer directly: 4.", "Still 4.", "Done.",
    ],
    [  # item 3: a malformed call and an unknown tool, then recovery
        '<tool_call>{"name": "calculator", "arguments": {"op": "+", "a": 1,</tool_call>'
        + call("weather", city="Paris"),
        call("calculator", op="-", a=10, b=3) + call("notes", text="recovered"),
        call("stop"),
    ],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    options = parser.parse_args()

    compose = ToolCompose(
        tools=[Calculator(), Search(), Notes(), StopTool()],
        parser=HermesParser(),
        rate_limits={"search": RateLimiter(max_concurrent=4, rate_per_second=50, burst=8)},
        per_call_timeout=5.0,
    )
    env = TransformedEnv(
        ChatEnv(batch_size=(4,), system_prompt="You are a helpful assistant.\n\n"
                + compose.render_tools()),
        compose,
    )
    questions = ["Tell me about Paris, TorchRL and Python.", "What is 6 * 7?", "What is 2 + 2?",
                 "What is 10 - 3?"]

    def report(env: TransformedEnv, td: TensorDict) -> None:
        stats = compose.last_stats
        print(f"step: {stats.calls} calls from {stats.items_with_calls} items, {stats.errors} errors, "
              f"dispatch {stats.dispatch_seconds * 1e3:.1f} ms, transform {stats.total_seconds * 1e3:.1f} ms")

    started = time.perf_counter()
    with compose:
        rollout = env.rollout(
            options.steps,
            ScriptedPolicy(SCRIPT),
            tensordict=TensorDict(query=questions, batch_size=(4,)),
            callback=report,
        )
        elapsed = time.perf_counter() - started
        final = rollout[..., -1]["next", "history"].prompt
        for item in range(4):
            print(f"\n=== trajectory {item} "
                  f"(stop requested: {bool(rollout['next', 'agentic', 'stop_requested'][item].any())})")
            for role, content in zip(final[item].role, final[item].content):
                if role in ("<none>", "system"):
                    continue
                cid = tool_call_id(content)
                tag = f" [{cid}]" if cid else ""
                print(f"{role}{tag}: {str(content).strip()}")
    print(f"\n{options.steps}-step rollout of 4 trajectories in {elapsed:.2f} s")


if __name__ == "__main__":
    main()
