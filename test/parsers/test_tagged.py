"""Tests for decoding JSON bodies closed by a tag (``parsers/_tagged.py``)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchrl_agentic.parsers._tagged import _decode_site, decode_tagged_json, skip_blank

BLANK = re.compile(r"\s*")
TOKENS = ["</x>", "{", "}", "[", "]", '"', "\\", ":", ",", " ", "\n", "\u00a0", "\x1c", "1", "a", '"k"']


class TestSkipBlank:
    @pytest.mark.parametrize(
        ("text", "pos", "expected"),
        [("a \n\t b", 1, 5), ("ab", 1, 1), ("a", 1, 1), ("", 0, 0), ("\u00a0\u2003x", 0, 2)],
    )
    def test_skips_unicode_whitespace(self, text: str, pos: int, expected: int) -> None:
        assert skip_blank(text, pos) == expected

    @given(st.text(alphabet=st.sampled_from(" \t\n\r\x0b\x0c\x1c\x85\u00a0\u2028\u3000ax{")))
    def test_agrees_with_the_blank_regex(self, text: str) -> None:
        for pos in range(len(text) + 1):
            assert skip_blank(text, pos) == BLANK.match(text, pos).end()  # type: ignore[union-attr]


class TestDecodeTaggedJson:
    def test_close_tag_inside_string_does_not_end_the_body(self) -> None:
        text = '<x> {"s": "</x>"} </x> tail'
        assert decode_tagged_json(text, 3, "</x>", "<x>") == ({"s": "</x>"}, 22, "")

    def test_blanks_around_the_value(self) -> None:
        assert decode_tagged_json('<x>\n {"a": 1} \n</x>!', 3, "</x>", "<x>") == ({"a": 1}, 19, "")

    def test_text_between_json_and_close_tag(self) -> None:
        value, end, problem = decode_tagged_json("<x>{} junk</x>!", 3, "</x>", "<x>")
        assert (value, end) == ({}, 14)
        assert problem == (
            "unexpected text after the JSON value in <x>; put exactly one JSON object between <x> and </x>"
        )

    def test_invalid_json_ends_at_the_first_close_tag(self) -> None:
        assert decode_tagged_json('<x>{"a": 1,}</x>{}</x>', 3, "</x>", "<x>") == (
            None,
            16,
            "invalid JSON in <x>: Expecting property name enclosed in double quotes at char 8",
        )

    def test_unclosed(self) -> None:
        assert decode_tagged_json("<x>{}", 3, "</x>", "<x>") == (
            {},
            5,
            "unclosed <x>: the message ended before </x>",
        )
        assert decode_tagged_json('<x>{"a', 3, "</x>", "<x>") == (
            None,
            6,
            "unclosed <x>: the message ended before </x> "
            "(invalid JSON in <x>: Unterminated string starting at char 1)",
        )

    def test_nested_too_deeply(self) -> None:
        value, end, problem = decode_tagged_json("<x>" + "[" * 100_000 + "</x>", 3, "</x>", "<x>")
        assert (value, end, problem) == (None, 100_007, "invalid JSON in <x>: nested too deeply")

    @given(
        st.lists(
            st.sampled_from(TOKENS),
            max_size=30,
        ).map("".join)
    )
    def test_fast_path_agrees_with_windowed_decoding(self, body: str) -> None:
        text = "<x>" + body
        begin = skip_blank(text, 3)
        expected = _decode_site(text, begin, text.find("</x>", begin), "</x>", "<x>")
        assert decode_tagged_json(text, 3, "</x>", "<x>") == expected
