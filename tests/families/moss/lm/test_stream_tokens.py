"""The hold-back streaming tokenizer: any split of a text gives the ids of the whole text, with the
fixture's byte tokenizer (the real ``transformers`` class of a checkpoint) and with a BPE trained here
with merges and a Qwen-style pre-tokenizer (where merges across a split would show)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from app.families.moss.lm.stream_tokens import StreamTokenizer, pretoken_spans

QWEN_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's a streaming test, isn't it?",
    "Numbers like 1234 and 3.5 or $20, and spaces   in  runs.\nNew lines too.",
    "Selamat pagi, apa khabar? Saya sihat. 你好，世界！ வணக்கம்.",
    "Speech arrives in deltas; words merge, and merges must match the whole text's.",
] * 20
TEXTS = [
    "The quick brown fox jumps over the lazy dog, streaming as it goes.",
    "It's 3.5 or 1234 — and then   some  spaces.\nA new line, isn't it?",
    "你好，世界！Selamat pagi. வணக்கம், friend.",
    "<|im_end|> stays text.",
]


def trained_bpe(tmp: Path) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|im_end|>"]
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer)


def encoder(tokenizer: Any) -> Any:
    def encode(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    return encode


def pieces(text: str, sizes: list[int]) -> list[str]:
    out, at, i = [], 0, 0
    while at < len(text):
        size = sizes[i % len(sizes)]
        out.append(text[at : at + size])
        at, i = at + size, i + 1
    return out


def assert_streams_like_whole(tokenizer: Any) -> None:
    encode = encoder(tokenizer)
    rng = random.Random(0)
    for text in TEXTS:
        whole = encode(text)
        splits = [[1], [3], [17], [len(text)]] + [[rng.randint(1, 7) for _ in range(9)] for _ in range(20)]
        for sizes in splits:
            stream = StreamTokenizer(encode, pretoken_spans(tokenizer))
            got: list[int] = []
            for piece in pieces(text, sizes):
                got += stream.push(piece)
            got += stream.end()
            assert got == whole, (text, sizes)


def test_the_fixture_tokenizer_streams_like_the_whole_text(moss_tts_dir: Path) -> None:
    assert_streams_like_whole(AutoTokenizer.from_pretrained(str(moss_tts_dir)))


def test_a_merging_bpe_streams_like_the_whole_text(tmp_path: Path) -> None:
    tokenizer = trained_bpe(tmp_path)
    encode = encoder(tokenizer)
    assert len(encode("The quick brown fox")) < len("The quick brown fox")  # it really merges
    naive = [i for piece in pieces(TEXTS[0], [3]) for i in encode(piece)]
    assert naive != encode(TEXTS[0])  # tokenizing each piece alone would not
    assert_streams_like_whole(tokenizer)


@pytest.mark.parametrize("text", ["", "   ", "one"])
def test_short_texts_come_out_at_the_end(moss_tts_dir: Path, text: str) -> None:
    tokenizer = AutoTokenizer.from_pretrained(str(moss_tts_dir))
    encode = encoder(tokenizer)
    stream = StreamTokenizer(encode, pretoken_spans(tokenizer))
    assert stream.push(text) == []
    assert stream.end() == encode(text)


def test_ids_are_emitted_before_the_end(tmp_path: Path) -> None:
    tokenizer = trained_bpe(tmp_path)
    stream = StreamTokenizer(encoder(tokenizer), pretoken_spans(tokenizer))
    early = stream.push("The quick brown fox jumps over ")
    assert early and len(early) >= 3  # everything but the held-back tail
