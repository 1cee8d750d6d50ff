"""JSON bodies that a closing tag must follow (``<tool_call>{...}</tool_call>``, ``<tool ...>{...}</tool>``).

The close tag may also appear inside the JSON's strings, so the JSON is decoded first and the tag
looked for after it. Decoding stays linear in the message length however hostile the message: see
``_decode_windowed``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from torchrl_agentic.parsers._calls import json_error

_DECODER = json.JSONDecoder()
_BLANK = re.compile(r"\s*")


def skip_blank(text: str, pos: int) -> int:
    """The first index at or after ``pos`` that is not whitespace (``\\s``), or ``len(text)``.

    Examples:
        >>> skip_blank("a \\n b", 1), skip_blank("ab", 1), skip_blank("a", 1)
        (4, 1, 1)
    """
    # ``str.isspace`` and ``\s`` share one definition of whitespace; most bodies start unindented.
    if pos >= len(text) or not text[pos].isspace():
        return pos
    blank = _BLANK.match(text, pos)
    return blank.end() if blank else pos


def decode_tagged_json(text: str, start: int, close: str, where: str) -> tuple[Any, int, str]:
    """Decode the JSON value opening at ``start`` (after blanks) and the ``close`` tag after it.

    The JSON is decoded first, so ``close`` inside a JSON string does not end the call site; when
    the JSON is invalid, the site ends at the first ``close``. ``close`` is a tag: it does not
    start with a blank.

    Returns:
        ``(value, end, problem)``: ``end`` is just past the close tag (the end of ``text`` when
        it is missing), ``problem`` is "" for a well-formed site and otherwise says what is wrong,
        written for the model; ``value`` is None when the JSON did not decode.

    Examples:
        >>> decode_tagged_json('<x> {"s": "</x>"} </x> tail', 3, "</x>", "<x>")
        ({'s': '</x>'}, 22, '')
        >>> decode_tagged_json("<x>{]</x>", 3, "</x>", "<x>")
        (None, 9, 'invalid JSON in <x>: Expecting property name enclosed in double quotes at char 1')
    """
    # ``close`` does not start with a blank, so looking for it from ``start`` finds the same one.
    first_close = text.find(close, start)
    if first_close != -1:
        # The common case: the value fills the text before the first close tag, up to blanks
        # (``str.strip`` and ``\s`` share one definition of whitespace).
        window = text[start:first_close].strip()
        try:
            value, end = _DECODER.raw_decode(window)
        except (ValueError, RecursionError):
            pass
        else:
            if end == len(window):
                return value, first_close + len(close), ""
    return _decode_site(text, skip_blank(text, start), first_close, close, where)


def _decode_site(text: str, begin: int, first_close: int, close: str, where: str) -> tuple[Any, int, str]:
    """``decode_tagged_json`` for the JSON at ``begin`` when it does not simply end at ``first_close``."""
    unclosed = f"unclosed {where}: the message ended before {close}"
    value, end, error = _decode_windowed(text, begin, close, first_close)
    if error:
        invalid = f"invalid JSON in {where}: {error}"
        if first_close == -1:
            return None, len(text), f"{unclosed} ({invalid})"
        return None, first_close + len(close), invalid
    after = skip_blank(text, end)
    if text.startswith(close, after):
        return value, after + len(close), ""
    close_at = text.find(close, end)
    if close_at == -1:
        return value, len(text), unclosed
    trailing = (
        f"unexpected text after the JSON value in {where}; "
        f"put exactly one JSON object between {where} and {close}"
    )
    return value, close_at + len(close), trailing


def _decode_windowed(text: str, begin: int, close: str, stop: int) -> tuple[Any, int, str]:
    """``raw_decode`` of the JSON value at ``begin``, on windows of ``text`` ending at close tags.

    A ``JSONDecodeError`` counts the lines from the start of the decoded string to ``pos``, so
    decoding the whole message at every malformed site would take quadratic time. The first window
    ends at the first close tag (``stop``); a window is widened (at least doubled, to the next close
    tag or the end) only when the value ran off its end, as when a string holds a close tag.

    Returns:
        ``(value, end, error)``: ``end`` is an index into ``text``; ``error`` is "" on success.
    """
    while True:
        window = text[begin:] if stop == -1 else text[begin:stop]
        try:
            value, end = _DECODER.raw_decode(window)
        except json.JSONDecodeError as exc:
            ran_off = exc.pos == len(window) or exc.msg.startswith("Unterminated string")
            if stop == -1 or not ran_off:
                return None, begin, json_error(exc)
        except (ValueError, RecursionError) as exc:
            return None, begin, json_error(exc)
        else:
            return value, begin + end, ""
        stop = text.find(close, max(stop + 1, begin + 2 * (stop - begin)))
