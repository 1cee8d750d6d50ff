"""``ToolCompose``: the TorchRL transform that runs the tool calls of every batch item each step."""

from __future__ import annotations

import math
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.data import Categorical, Composite
from torchrl.data.llm import History
from torchrl.envs.transforms import Compose, Transform

from torchrl_agentic._history import ToolResponseText, append_messages, gc_paused, newest_messages
from torchrl_agentic.compose_checks import check_parser, check_rate_limits, check_settings
from torchrl_agentic.dispatch import Dispatcher, ItemWork, Limiter
from torchrl_agentic.loop import LoopThread
from torchrl_agentic.parsers.base import ToolCallParser
from torchrl_agentic.sessions import SessionStore
from torchrl_agentic.tool import Tool
from torchrl_agentic.toolset import ToolSet
from torchrl_agentic.types import DispatchResult, MalformedCall, ParseResult, StepStats

FLAG_KEYS = (
    ("agentic", "any_tool_calls"),
    ("agentic", "any_error"),
    ("agentic", "stop_requested"),
)


class ToolCompose(ToolSet, Compose):
    """Parses each assistant message once, runs all tool calls of all batch items concurrently,
    and appends the results to the History as tool messages, in call order, with their call ids.

    The compose holds :class:`~torchrl_agentic.Tool` objects (not transforms): ``compose["python"]``,
    ``"python" in compose``, ``append``/``insert``/``compose[i] = tool``. Calls run on one event
    loop owned by the compose, on its own thread, so ``env.step`` works inside a running loop.

    Keyword Args:
        tools: the tools the model may call.
        parser: the wire format (e.g. ``HermesParser()``).
        rate_limits: a ``RateLimiter`` per tool name; a limiter may be shared between composes.
        per_call_timeout: seconds a call may take, rate-limiter wait included; None for no limit.
        pass_state_to_tools: hand the item's tensordict (without its history) to tools with
            ``wants_state = True`` as ``ctx.state``.
        tool_role: role of the result messages.
        validate_inputs: check arguments against each tool's ``input_schema``.
        max_calls_per_step: valid calls of one message that run; later ones get an error result.

    Each step adds per-item booleans ``("agentic", "any_tool_calls")``, ``("agentic", "any_error")``
    and ``("agentic", "stop_requested")``; a stop request also sets ``done`` and ``terminated``.
    The step's results per item are in :attr:`last_dispatch`, its counts and timings in
    :attr:`last_stats`.

    Examples:
        >>> from torchrl.envs import TransformedEnv
        >>> from torchrl.envs.llm import ChatEnv
        >>> from torchrl_agentic import HermesParser, StopTool, ToolCompose
        >>> env = TransformedEnv(
        ...     ChatEnv(batch_size=(2,)), ToolCompose(tools=[StopTool()], parser=HermesParser())
        ... )
        >>> "stop" in env.transform
        True
        >>> env.close()
    """

    def __init__(
        self,
        *,
        tools: Iterable[Tool],
        parser: ToolCallParser,
        rate_limits: Mapping[str, Limiter] | None = None,
        per_call_timeout: float | None = None,
        pass_state_to_tools: bool = False,
        tool_role: str = "tool",
        validate_inputs: bool = True,
        max_calls_per_step: int | None = None,
    ) -> None:
        super().__init__()
        check_settings(per_call_timeout, max_calls_per_step, tool_role)
        check_parser(parser)
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.append(tool)
        self.parser = parser
        self.rate_limits = check_rate_limits(rate_limits, self._tools)
        self.per_call_timeout = per_call_timeout
        self.pass_state_to_tools = pass_state_to_tools
        self.tool_role = tool_role
        self.validate_inputs = validate_inputs
        self.max_calls_per_step = max_calls_per_step
        self._start_runtime()

    def _start_runtime(self) -> None:
        """The per-instance runtime: loop thread (started lazily), sessions, last-step records."""
        self.last_dispatch: list[DispatchResult] = []
        self.last_stats = StepStats()
        self._sessions = SessionStore()
        self._loop = LoopThread(f"ToolCompose-{id(self):x}")
        self._set_up: set[str] = set()
        self._dispatcher: Dispatcher | None = None
        self._closed = False
        # A safety net for a compose dropped without close(): stop its loop thread. Tools and
        # sessions are only released by close().
        self._finalizer = weakref.finalize(self, self._loop.close)

    def render_tools(self) -> str:
        """The parser's tool-advertising block for the system prompt."""
        return self.parser.render_tools(self.tools)

    # ----- lifecycle ----------------------------------------------------------------------------

    @property
    def sessions(self) -> SessionStore:
        """The per-trajectory sessions (keyed by flat batch index)."""
        return self._sessions

    def clone(self) -> ToolCompose:
        """An independent compose (own loop, own sessions, cloned tools) sharing the rate limiters."""
        return type(self)(
            tools=[tool.clone() for tool in self._tools.values()],
            parser=self.parser,
            rate_limits=self.rate_limits,
            per_call_timeout=self.per_call_timeout,
            pass_state_to_tools=self.pass_state_to_tools,
            tool_role=self.tool_role,
            validate_inputs=self.validate_inputs,
            max_calls_per_step=self.max_calls_per_step,
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> ToolCompose:
        return self.clone()

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = super().__getstate__()
        runtime = ("_loop", "_sessions", "_finalizer", "_set_up", "_dispatcher", "last_dispatch",
                   "last_stats")
        for key in runtime:
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._start_runtime()

    def close(self) -> None:
        """Release every session, tear the tools down and stop the loop thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._loop.close(self._aclose() if self._loop.running else None)
        self._finalizer.detach()

    async def _aclose(self) -> None:
        try:
            await self._sessions.release_all()
        finally:
            for name in list(self._set_up):
                await self._tools[name].teardown() if name in self._tools else None
            self._set_up.clear()

    def __enter__(self) -> ToolCompose:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this ToolCompose is closed; use clone() to get a fresh one")

    # ----- TorchRL hooks ------------------------------------------------------------------------

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        return Transform.transform_output_spec(self, output_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        shape = observation_spec.shape
        flags = Composite(
            {key[1]: Categorical(2, shape=shape, dtype=torch.bool) for key in FLAG_KEYS},
            shape=shape,
        )
        observation_spec["agentic"] = flags
        return observation_spec

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        # Tools have no inverse: skip Transform.inv's defensive copy of the whole input, which costs
        # more than a ChatEnv step at batch 64. Nothing downstream writes to the input, but a
        # partial step pops "_step" from it, so keep the copy then.
        if "_step" in tensordict.keys():
            return super().inv(tensordict)
        return tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict

    def _reset(
        self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        self._check_open()
        shape = tensordict_reset.batch_size
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None:
            indices = list(range(math.prod(shape)))
        else:
            count = math.prod(shape)
            indices = torch.nonzero(reset.reshape(count, -1).any(-1)).flatten().tolist()
        if len(self._sessions) and indices:
            self._loop.run(self._sessions.release(indices))
        for key in FLAG_KEYS:
            tensordict_reset.set(key, torch.zeros(shape, dtype=torch.bool))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._check_open()
        with gc_paused():
            return self._tool_step(tensordict, next_tensordict)

    def _tool_step(
        self, tensordict: TensorDictBase, next_tensordict: TensorDictBase
    ) -> TensorDictBase:
        started = time.perf_counter()
        policy_role = self._policy_role()
        shape = next_tensordict.batch_size
        count = math.prod(shape)
        history = next_tensordict["history"]
        prompt: History = history.prompt
        flat = prompt.reshape(count, -1) if len(shape) > 1 else prompt
        parsed = self._parse_newest(flat, policy_role)
        states = self._states(tensordict, parsed, count)
        work = [ItemWork(i, p, states[i]) for i, p in enumerate(parsed) if p is not None and
                (p.calls or p.errors)]
        dispatch_started = time.perf_counter()
        outcomes = self._loop.run(self._dispatch(work)) if work else []
        dispatch_seconds = time.perf_counter() - dispatch_started
        results: list[DispatchResult] = [
            DispatchResult(cleaned_text=p.text if p is not None else "") for p in parsed
        ]
        for item, outcome in zip(work, outcomes):
            results[item.batch_index] = outcome
        self.last_dispatch = results
        if work:
            rows = [self._render(r) for r in results]
            new = append_messages(flat, rows)
            history.prompt = new.reshape(*shape, -1) if len(shape) > 1 else new
            next_tensordict.set("history", history)
        self._write_flags(next_tensordict, results, shape)
        self.last_stats = StepStats(
            items_with_calls=len(work),
            calls=sum(len(r.calls) for r in outcomes),
            errors=sum(sum(x.is_error for x in r.results) for r in outcomes),
            dispatch_seconds=dispatch_seconds,
            total_seconds=time.perf_counter() - started,
        )
        return next_tensordict

    # ----- step internals -----------------------------------------------------------------------

    def _policy_role(self) -> str:
        parent = self.parent
        base = getattr(parent, "base_env", None) if parent is not None else None
        if base is not None and getattr(base, "input_mode", "history") != "history":
            raise RuntimeError(
                f"ToolCompose needs a ChatEnv in history mode, got input_mode={base.input_mode!r}; "
                "build the env with ChatEnv(input_mode='history')"
            )
        role = getattr(base, "policy_role", None)
        return role if isinstance(role, str) else "assistant"

    def _parse_newest(self, flat: History, policy_role: str) -> list[ParseResult | None]:
        """Parse each item's newest message once, when it was written by the policy."""
        parsed: list[ParseResult | None] = []
        for message in newest_messages(flat):
            if message.get("role") != policy_role:
                parsed.append(None)
                continue
            message.setdefault("tool_calls", None)
            parsed.append(self._safe_parse(message))
        return parsed

    def _safe_parse(self, message: dict[str, Any]) -> ParseResult:
        try:
            return self.parser.parse(message)
        except Exception as exc:
            error = MalformedCall(
                f"the tool call parser failed on this message: {type(exc).__name__}: {exc}",
                "call_0",
            )
            content = message["content"]
            return ParseResult(text=content if isinstance(content, str) else "", errors=(error,))

    def _states(
        self, tensordict: TensorDictBase, parsed: Sequence[ParseResult | None], count: int
    ) -> list[Any]:
        if not (self.pass_state_to_tools and any(t.wants_state for t in self._tools.values())):
            return [None] * count
        flat = tensordict.exclude("history", "next").reshape(count)
        return [flat[i] if p is not None and p.calls else None for i, p in enumerate(parsed)]

    async def _dispatch(self, work: list[ItemWork]) -> list[DispatchResult]:
        for name, tool in self._tools.items():
            if name not in self._set_up:
                await tool.setup()
                self._set_up.add(name)
        if self._dispatcher is None or self._dispatcher.tools != self._tools:
            # built once and kept while the tools stay the same: it caches compiled validators
            self._dispatcher = Dispatcher(
                self._tools,
                rate_limits=self.rate_limits,
                per_call_timeout=self.per_call_timeout,
                validate_inputs=self.validate_inputs,
                max_calls_per_step=self.max_calls_per_step,
                sessions=self._sessions,
            )
        return await self._dispatcher.run_batch(work)

    def _render(self, result: DispatchResult) -> list[tuple[str, str]]:
        rows: list[tuple[str, str]] = []
        for call, outcome in zip(result.calls, result.results):
            message = self.parser.render_result(call, outcome)
            content = message.get("content", "")
            text = content if isinstance(content, str) else str(content)
            tagged = ToolResponseText(
                text,
                tool_call_id=str(message.get("tool_call_id", call.call_id)),
                name=str(message.get("name", "")),
                is_error=outcome.is_error,
            )
            rows.append((self.tool_role, tagged))
        return rows

    def _write_flags(
        self, next_tensordict: TensorDictBase, results: Sequence[DispatchResult], shape: torch.Size
    ) -> None:
        values = {
            FLAG_KEYS[0]: [bool(r.calls) for r in results],
            FLAG_KEYS[1]: [r.any_error for r in results],
            FLAG_KEYS[2]: [r.stop_requested for r in results],
        }
        for key, flags in values.items():
            next_tensordict.set(key, torch.tensor(flags, dtype=torch.bool).reshape(shape))
        stop = values[FLAG_KEYS[2]]
        if any(stop):
            stop_t = torch.tensor(stop, dtype=torch.bool).reshape(shape)
            for done_key in ("done", "terminated"):
                flag = next_tensordict.get(done_key, None)
                if flag is not None:
                    next_tensordict.set(done_key, flag | stop_t.reshape(flag.shape))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(tools={list(self._tools)}, parser={type(self.parser).__name__}, "
            f"rate_limits={sorted(self.rate_limits)}, per_call_timeout={self.per_call_timeout})"
        )
