"""split_text: sentence, then clause, then word boundaries, in English, Malay, Mandarin and Tamil."""

from __future__ import annotations

import re
from collections.abc import Callable

from app.text.split import split_text


def under(limit: int) -> Callable[[str], bool]:
    return lambda chunk: len(chunk) <= limit


def words(text: str) -> list[str]:
    return text.split()


EN = (
    "The meeting starts at nine. Please bring the report, the slides, and your laptop; we will review "
    "the budget for 3.5 hours. Afterwards, lunch is served!"
)
MS = (
    "Selamat pagi semua. Hari ini kita akan membincangkan bajet syarikat, pelan pemasaran, dan jadual "
    "projek; sila bersedia. Terima kasih!"
)
ZH = "今天天气很好。我们去公园散步，然后在湖边吃午饭；下午再回家。你觉得怎么样？"
TA = (
    "இன்று வானிலை மிகவும் நன்றாக உள்ளது. நாம் பூங்காவுக்குச் சென்று, ஏரிக்கரையில் மதிய உணவு "
    "சாப்பிடலாம். பிறகு வீட்டுக்குத் திரும்பலாம்!"
)


def test_text_that_fits_is_one_chunk() -> None:
    assert split_text(EN, under(len(EN))) == [EN]


def test_english_cuts_at_sentence_ends_first() -> None:
    chunks = split_text(EN, under(110))
    assert chunks == [
        "The meeting starts at nine.",
        "Please bring the report, the slides, and your laptop; we will review the budget for 3.5 hours.",
        "Afterwards, lunch is served!",
    ]


def test_english_sentence_too_long_cuts_at_clauses_then_words() -> None:
    chunks = split_text(EN, under(40))
    assert all(len(chunk) <= 40 for chunk in chunks)
    assert words(" ".join(chunks)) == words(EN)  # nothing lost, no word cut
    assert "Please bring the report, the slides," in chunks
    assert "3.5" in " ".join(chunks).split()  # a decimal point is not a sentence end
    tight = split_text(EN, under(12))
    assert all(word in words(EN) for chunk in tight for word in chunk.split())


def test_malay_sentences_and_clauses() -> None:
    chunks = split_text(MS, under(60))
    assert chunks[0] == "Selamat pagi semua."
    assert chunks[1] == "Hari ini kita akan membincangkan bajet syarikat,"
    assert chunks[-1] == "Terima kasih!"
    assert words(" ".join(chunks)) == words(MS)


def test_mandarin_cuts_at_full_width_marks_then_between_characters() -> None:
    # the long second sentence is cut at a clause mark; its rest joins the next sentence
    assert split_text(ZH, under(20)) == [
        "今天天气很好。",
        "我们去公园散步，然后在湖边吃午饭；",
        "下午再回家。你觉得怎么样？",
    ]
    tiny = split_text(ZH, under(4))
    assert all(len(chunk) <= 4 for chunk in tiny)
    assert "".join(tiny) == ZH  # between characters, nothing lost or added


def test_tamil_cuts_at_sentences_clauses_and_words_never_inside_one() -> None:
    chunks = split_text(TA, under(50))
    assert chunks[0] == "இன்று வானிலை மிகவும் நன்றாக உள்ளது."
    assert chunks[-1] == "பிறகு வீட்டுக்குத் திரும்பலாம்!"
    assert words(" ".join(chunks)) == words(TA)
    narrow = split_text(TA, under(15))
    assert words(" ".join(narrow)) == words(TA)
    assert all(word in words(TA) for chunk in narrow for word in chunk.split())


def test_a_word_longer_than_the_budget_stays_whole() -> None:
    long_word = "Pneumonoultramicroscopicsilicovolcanoconiosis"
    assert split_text(f"Say {long_word} twice.", under(10)) == ["Say", long_word, "twice."]


def test_chunks_are_stripped_and_non_empty() -> None:
    chunks = split_text("  One.   Two.\n\nThree.  ", under(6))
    assert chunks == ["One.", "Two.", "Three."]
    assert all(chunk and not re.match(r"\s|.*\s$", chunk) for chunk in chunks)
