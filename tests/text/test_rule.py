"""rule mode: cleanup, pronunciation table and Malaysian entities (through the spoken verbalizer)."""

from __future__ import annotations

import re

import pytest

from app.text.rule import clean, normalize_rule
from app.text.rule.cleanup import cleanup
from app.text.rule.pronunciation import apply_pronunciations


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("Hello!!! How are you?!", "Hello! How are you?"),
        ("Really?? Yes!!", "Really? Yes!"),
        ("好！！！真的？？好。。", "好！真的？好。"),
        ("Wait—what? Fine -- go.", "Wait, what? Fine, go."),
        ("Hello - how are you", "Hello, how are you"),
        ("3–5 people, 9am – 5pm, 2020—2024", "3-5 people, 9am-5pm, 2020-2024"),
        ("Isnin – Jumaat", "Isnin, Jumaat"),
        ("Mon–Fri", "Mon-Fri"),
        ("kanak-kanak bermain, e-mail ke-3, -5°C", "kanak-kanak bermain, e-mail ke-3, -5°C"),
        ("“Hi,” he said… don’t ‘go’", "\"Hi,\" he said... don't 'go'"),
        ("Wait.... ok.. fine", "Wait... ok. fine"),
        ("Price 5 * 3 = 15 and 2^8, *note*", "Price 5 * 3 = 15 and 2^8, note"),
        ("a_b _x_ \\ {y} [1] `z` ~approx ~5", "a_b x y 1 z approx ~5"),
        ("Menu | Home | About", "Menu, Home, About"),
        ("• one • two", "one, two"),
        ("Great job 👍🏽 ✓ done 👨‍👩‍👧!", "Great job done!"),
        ("Hello , world . Yes !", "Hello, world. Yes!"),
        ("— Hello —", "Hello,"),
        ("Rate: .5% today, . Done", "Rate: .5% today. Done"),
        ("Email a@b.com, 50% off, #1, $5, 1/2, a+b, x=y", "Email a@b.com, 50% off, #1, $5, 1/2, a+b, x=y"),
        ("Plain sentence, unchanged.", "Plain sentence, unchanged."),
    ],
)
def test_cleanup(source: str, expected: str) -> None:
    assert cleanup(source) == expected


def test_cleanup_keeps_bang_and_adds_no_full_stop() -> None:
    assert cleanup("Hello! How can I help you") == "Hello! How can I help you"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("Syarikat ABC Sdn. Bhd. ialah pembekal.", "Syarikat ABC sendirian berhad ialah pembekal."),
        ("Bayar kepada XYZ Sdn Bhd.", "Bayar kepada XYZ sendirian berhad."),
        ("ABC SDN. BHD. Hubungi kami.", "ABC sendirian berhad. Hubungi kami."),
        ("Maybank Bhd and Foo Pte. Ltd. agreed", "Maybank berhad and Foo private limited agreed"),
        ("Naik LRT dari KL ke KLIA.", "Naik L R T dari K L ke K L I A."),
        ("A KL-based firm", "A K L-based firm"),
        ("UMNO and PETRONAS", "umno and petronas"),
    ],
)
def test_pronunciations(source: str, expected: str) -> None:
    assert apply_pronunciations(source) == expected


@pytest.mark.parametrize(
    "ordinary",
    [
        "ms and ma said the dr and mr were fine",
        "Ma, saya nak pergi klinik.",
        "the atmosphere at the atm was calm, kl is lower case",
        "Askar mara ke hadapan, sdn is not a word here sdnx",
        "Visit kl.gov.my or KL.example.com, mail KL@example.com",
        "Klang, Kluang and Petaling Jaya",
    ],
)
def test_pronunciations_never_rewrite_ordinary_words(ordinary: str) -> None:
    assert apply_pronunciations(ordinary) == ordinary


def test_rule_without_malaysian_is_sanitize_and_cleanup() -> None:
    text = "**Hello!!** Call *now*—it's 50% off (today only)..."
    assert normalize_rule(text) == "Hello! Call now, it's 50% off (today only)..."
    assert normalize_rule(text) == clean(text)


def test_rule_without_malaysian_leaves_entities_and_terms() -> None:
    text = "Bayar RM1,250.50 kepada ABC Sdn. Bhd. di KL"
    assert normalize_rule(text) == text


# The cases below go through the spoken verbalizer (app.text.spoken).


def test_seed_readme_example() -> None:
    text = "**Harga** rumah RM500,000. Hubungi 012-1234567 atau email husein.zol05@gmail.com"
    out = normalize_rule(text, normalize_malaysian=True)
    assert out == (
        "Harga rumah lima ratus ribu ringgit. Hubungi kosong satu dua satu dua tiga empat lima enam tujuh "
        "atau email husein dot zol kosong lima at gmail dot com"
    )


def test_ringgit_keeps_its_cents() -> None:
    out = normalize_rule("Baki saya tinggal RM1,250.50 sahaja.", normalize_malaysian=True)
    assert "lima puluh sen" in out
    assert "seribu dua ratus lima puluh ringgit" in out
    assert out.endswith("sahaja.")
    assert ". lima" not in out


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Your total is RM1,250.50, due on 12/9/2026 at 3pm.", "auto"),
        ("Call 03-2145 6789 or email ali.b@gmail.com, 50% off 2kg!", "en"),
        ("IC saya 900101-14-5678, bayar RM45.90 sebelum 5 Jun.", "ms"),
        ("价格是RM500，明天下午3点。", "zh"),
        ("உங்கள் கட்டணம் RM250.", "ta"),
    ],
)
def test_malaysian_reads_every_digit(text: str, language: str) -> None:
    out = normalize_rule(text, normalize_malaysian=True, language=language)
    assert not re.search(r"\d", out), out


def test_malaysian_keeps_plain_text_and_punctuation() -> None:
    text = "Hello! How can I help you today, ma?"
    assert normalize_rule(text, normalize_malaysian=True) == text


def test_malaysian_applies_the_pronunciation_table() -> None:
    out = normalize_rule("Hubungi ABC Sdn. Bhd. di KL, kanak-kanak suka.", normalize_malaysian=True)
    assert out == "Hubungi ABC sendirian berhad di K L, kanak-kanak suka."


@pytest.mark.parametrize(
    "text",
    [
        "# Hi\n\n- **one** item — two!!\n- three…\n\n<p>Tom &amp; Jerry</p>",
        "Wait—what?! 3–5 people | 9am – 5pm • done 👍",
        "2024. Tahun yang baik. | Item | Price |\n|---|---|\n| Tea | RM5 |",
    ],
)
def test_clean_is_idempotent(text: str) -> None:
    once = clean(text)
    assert clean(once) == once
