"""Shared fixtures: offline chat envs wrapped with ToolCompose, closed after each test."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import tensordict

tensordict.set_list_to_stack(True).set()

from torchrl.envs import TransformedEnv  # noqa: E402
from torchrl.envs.llm import ChatEnv  # noqa: E402

from torchrl_agentic import HermesParser, ToolCompose  # noqa: E402


@pytest.fixture
def make_env() -> Iterator[Callable[..., TransformedEnv]]:
    envs: list[TransformedEnv] = []

    def factory(tools: list[Any], batch_size: tuple[int, ...] = (2,), **kwargs: Any) -> TransformedEnv:
        kwargs.setdefault("parser", HermesParser())
        env = TransformedEnv(ChatEnv(batch_size=batch_size), ToolCompose(tools=tools, **kwargs))
        envs.append(env)
        return env

    yield factory
    for env in envs:
        env.transform.close()


@pytest.fixture
def no_thread_leak() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.name.startswith("ToolCompose")]
    assert not leaked, f"threads left behind: {leaked}"


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Any:
    """An offline word-level tokenizer: enough for ``apply_chat_template(tokenize=False)``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
