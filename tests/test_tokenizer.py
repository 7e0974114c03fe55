"""Exact counts: differential tests against Python tiktoken (run offline) on every text of the
real data and on generated text, plus names, encode/decode and bad input."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxwindow
from ctxwindow import (
    CallableTokenizer,
    HeuristicTokenizer,
    InvalidArgumentError,
    InvalidTextError,
    InvalidTypeError,
    Tokenizer,
    UnknownEncodingError,
)

REFERENCE_ENCODINGS = ["cl100k_base", "o200k_base"]

# Pieces that exercise every branch of the split patterns.
TRICKY = [
    " ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", " \n ", "\u00a0", "\u3000", "\u2003", "\u0085",
    "'s", "'S", "'ll", "'LL", "'ve", "'re", "'m", "'d", "'t", "'x", "ſ", "K",
    "a", "hello", "Hello", "HELLO", "camelCase", "snake_case", "ÀÉÎ", "naïve", "Ελληνικά",
    "русский", "中文", "日本語", "한국어", "\u0301", "a\u0301", "\u0903", "ǅ", "ʰ",
    "0", "12", "123", "1234567", "3.14", "٣", "Ⅻ", "½",
    ".", ",", "!", "?", "...", "/", "//", "\\", "{", "}", "[", "]", "\"", "(", ")", "<|endoftext|>",
    "👍", "👍🏽", "👨‍👩‍👧", "🇫🇷", "\u200d", "\ufeff", "\x00", "\x7f", "\U0001F600",
]

text_with_tricky_pieces = st.lists(st.sampled_from(TRICKY), max_size=40).map("".join)
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=300)


@pytest.fixture(scope="module")
def reference(tiktoken_module: Any) -> dict[str, Any]:
    return {name: tiktoken_module.get_encoding(name) for name in REFERENCE_ENCODINGS}


@pytest.mark.parametrize("encoding", REFERENCE_ENCODINGS)
def test_counts_equal_tiktoken_on_all_real_data(
    encoding: str, reference: dict[str, Any], real_texts: list[str]
) -> None:
    tokenizer = Tokenizer(encoding)
    expected = [len(ids) for ids in reference[encoding].encode_ordinary_batch(real_texts)]
    counts = tokenizer.count_many(real_texts)
    assert len(real_texts) > 50_000
    mismatches = [
        (text[:80], int(got), want)
        for text, got, want in zip(real_texts, counts, expected)
        if got != want
    ]
    assert mismatches == []
    # The single-text path agrees with the batch path.
    assert [tokenizer.count(t) for t in real_texts[:2000]] == expected[:2000]


@pytest.mark.parametrize("encoding", REFERENCE_ENCODINGS)
@given(text=st.one_of(any_text, text_with_tricky_pieces))
def test_counts_equal_tiktoken_on_generated_text(
    encoding: str, reference: dict[str, Any], text: str
) -> None:
    expected = reference[encoding].encode_ordinary(text)
    tokenizer = Tokenizer(encoding)
    assert tokenizer.count(text) == len(expected)
    assert tokenizer.encode(text) == expected
    assert tokenizer.decode(expected) == text


@pytest.mark.parametrize("encoding", REFERENCE_ENCODINGS)
@pytest.mark.parametrize(
    "text",
    [
        "a" * 100_000,
        " " * 50_000 + "x",
        "\n" * 20_000,
        "ab" * 40_000,
        "1" * 30_001,
        "é" * 50_000,
        "👍" * 10_000,
        "!" * 60_000,
        "\u00a0" * 10_000 + "z",
    ],
    ids=["a", "spaces", "newlines", "ab", "digits", "e-acute", "emoji", "bang", "nbsp"],
)
def test_long_single_character_runs(encoding: str, reference: dict[str, Any], text: str) -> None:
    assert Tokenizer(encoding).count(text) == len(reference[encoding].encode_ordinary(text))


@pytest.mark.parametrize("encoding", ctxwindow.encoding_names())
@given(text=st.one_of(any_text, text_with_tricky_pieces))
def test_fast_count_equals_encode_for_every_encoding(encoding: str, text: str) -> None:
    # encode() runs tiktoken's own pattern (fancy-regex); count() the rewritten one.
    tokenizer = Tokenizer(encoding)
    assert tokenizer.count(text) == len(tokenizer.encode(text))
    assert "".join(tokenizer.pieces(text)) == text


@given(texts=st.lists(st.one_of(any_text, text_with_tricky_pieces), max_size=30))
def test_count_many_equals_count(texts: list[str]) -> None:
    tokenizer = Tokenizer("o200k_base")
    counts = tokenizer.count_many(texts)
    assert counts.dtype == np.uint32
    assert counts.shape == (len(texts),)
    assert counts.tolist() == [tokenizer.count(t) for t in texts]


def test_count_many_accepts_any_iterable_and_is_parallel_safe() -> None:
    tokenizer = Tokenizer("cl100k_base")
    texts = [f"line {i} " * (i % 97) for i in range(20_000)]
    counts = tokenizer.count_many(iter(texts))
    assert counts.tolist() == [tokenizer.count(t) for t in texts]
    assert tokenizer.count_many(()).shape == (0,)


def test_names_and_models() -> None:
    assert ctxwindow.encoding_names() == ["cl100k_base", "o200k_base", "p50k_base", "r50k_base"]
    for model, encoding in {
        "gpt-4o": "o200k_base",
        "gpt-4o-mini": "o200k_base",
        "gpt-4o-2024-08-06": "o200k_base",
        "gpt-4.1": "o200k_base",
        "gpt-4.1-nano": "o200k_base",
        "gpt-5": "o200k_base",
        "o1": "o200k_base",
        "o3-mini": "o200k_base",
        "o4-mini": "o200k_base",
        "gpt-4": "cl100k_base",
        "gpt-4-turbo": "cl100k_base",
        "gpt-3.5-turbo": "cl100k_base",
        "text-embedding-3-small": "cl100k_base",
        "text-embedding-3-large": "cl100k_base",
        "text-davinci-003": "p50k_base",
        "davinci": "r50k_base",
    }.items():
        assert Tokenizer.for_model(model).name == encoding, model
        assert ctxwindow.encoding_for_model(model) == encoding
    tokenizer = Tokenizer("cl100k_base")
    assert tokenizer.exact is True
    assert tokenizer.vocab_size == 100_256
    assert repr(tokenizer) == 'Tokenizer("cl100k_base")'
    assert pickle.loads(pickle.dumps(tokenizer)).name == "cl100k_base"


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UnknownEncodingError, match="o200k_base") as info:
        Tokenizer("gpt2_base")
    assert isinstance(info.value, ValueError)
    with pytest.raises(UnknownEncodingError, match=r"gpt-4o.*estimate: claude-\*.*gemini-\*"):
        Tokenizer.for_model("llama-3-70b")


@pytest.mark.parametrize("bad", [None, 3, b"bytes", ["a"], 1.5])
def test_non_str_text_is_a_type_error(bad: object) -> None:
    tokenizer = Tokenizer("cl100k_base")
    with pytest.raises(InvalidTypeError, match="text must be a str"):
        tokenizer.count(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        tokenizer.encode(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError):
        Tokenizer(bad)  # type: ignore[arg-type]


SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d", "\ude00", "\ud83d\ude00"]
surrogate = st.integers(0xD800, 0xDFFF).map(chr)
text_with_surrogates = st.lists(
    st.one_of(surrogate, st.sampled_from(TRICKY + SURROGATES), any_text), max_size=30
).map("".join)


def tiktoken_replacement(text: str) -> str:
    """What Python tiktoken's encode does to a str that UTF-8 cannot carry."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@pytest.mark.parametrize("encoding", REFERENCE_ENCODINGS)
@given(text=text_with_surrogates)
def test_lone_surrogates_count_as_tiktoken_counts_them(
    encoding: str, reference: dict[str, Any], text: str
) -> None:
    # tiktoken replaces each lone surrogate with U+FFFD (a split pair becomes its character).
    expected = reference[encoding].encode_ordinary(text)
    assert expected == reference[encoding].encode(text, disallowed_special=())
    tokenizer = Tokenizer(encoding)
    assert tokenizer.count(text) == len(expected)
    assert tokenizer.encode(text) == expected
    assert tokenizer.count_many(["fine", text]).tolist() == [1, len(expected)]
    assert tokenizer.pieces(text) == tokenizer.pieces(tiktoken_replacement(text))


@pytest.mark.parametrize("encoding", REFERENCE_ENCODINGS)
@pytest.mark.parametrize(
    "text",
    ["\ud800", "ok \udfff ok", "\ud83d\ude00", "\ude00\ud83d", "a" * 20_000 + "\udc80" * 5_000],
    ids=["high", "low-inside", "split-pair", "reversed-pair", "long"],
)
def test_lone_surrogate_examples(encoding: str, reference: dict[str, Any], text: str) -> None:
    expected = reference[encoding].encode_ordinary(text)
    assert Tokenizer(encoding).count(text) == len(expected)
    assert Tokenizer(encoding).encode(text) == expected


def test_surrogates_in_the_estimators() -> None:
    assert HeuristicTokenizer(chars_per_token=1.0).count("a\ud800b") == 3
    seen: list[str] = []

    def counter(text: str) -> int:
        seen.append(text)
        return 1

    CallableTokenizer(counter).count("x\udfff")
    assert seen == ["x\ufffd"]


def test_count_many_rejects_non_text() -> None:
    tokenizer = Tokenizer("cl100k_base")
    with pytest.raises(InvalidTypeError, match="single str"):
        tokenizer.count_many("not a list")
    with pytest.raises(InvalidTypeError, match=r"texts\[1\]"):
        tokenizer.count_many(["a", 2])  # type: ignore[list-item]


def test_decode_errors() -> None:
    tokenizer = Tokenizer("cl100k_base")
    assert tokenizer.decode([15339, 1917]) == "hello world"
    assert tokenizer.decode(np.array([15339, 1917])) == "hello world"
    with pytest.raises(InvalidArgumentError, match="not in the vocabulary"):
        tokenizer.decode([10**9])
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        tokenizer.decode([-1])
    with pytest.raises(InvalidTypeError):
        tokenizer.decode([1.5])  # type: ignore[list-item]
    # The first token of an emoji is a partial UTF-8 sequence.
    with pytest.raises(InvalidTextError, match="UTF-8"):
        tokenizer.decode(tokenizer.encode("😀")[:1])


def test_heuristic_tokenizer_is_named_as_an_estimate() -> None:
    estimator = HeuristicTokenizer()
    assert estimator.exact is False
    assert estimator.name == "heuristic-4"
    assert estimator.count("") == 0
    assert estimator.count("abcd") == 1
    assert estimator.count("abcde") == 2
    assert estimator.count("ééé") == 1  # characters, not bytes
    assert HeuristicTokenizer(2.5).count("abcdef") == 3
    assert estimator.count_many(["abcd", "abcdefgh"]).tolist() == [1, 2]
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidArgumentError, match="chars_per_token"):
            HeuristicTokenizer(bad)
    with pytest.raises(InvalidTypeError):
        HeuristicTokenizer("4")  # type: ignore[arg-type]


def test_callable_tokenizer() -> None:
    words = CallableTokenizer(lambda text: len(text.split()), name="words")
    assert words.name == "words" and words.exact is False
    assert words.count("a b c") == 3
    assert words.count_many(["a", "a b"]).tolist() == [1, 2]
    # Chat accounting applies: 3 framing + role (1 word) + content (2 words) + 3 priming.
    assert words.count_messages([{"role": "user", "content": "hi there"}]) == 9
    with pytest.raises(InvalidTypeError, match="callable"):
        CallableTokenizer(42)  # type: ignore[arg-type]
    negative = CallableTokenizer(lambda text: -1)
    with pytest.raises(InvalidArgumentError, match=">= 0"):
        negative.count("x")
    failing = CallableTokenizer(lambda text: 1 // 0)
    with pytest.raises(ZeroDivisionError):
        failing.count("x")


def test_satisfy_the_counter_protocol() -> None:
    for counter in (Tokenizer("cl100k_base"), HeuristicTokenizer(), CallableTokenizer(len)):
        assert isinstance(counter, ctxwindow.TokenCounter)
