"""Language detection, the explicit language override, per-sentence languages and the code-switch rule."""

from __future__ import annotations

import pytest

from app.text.spoken import detect_language, normalize_spoken


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Your balance is due tomorrow.", "en"),
        ("Baki akaun anda perlu dibayar esok.", "ms"),
        ("您的余额明天到期。", "zh"),
        ("உங்கள் கட்டணம் நாளை செலுத்த வேண்டும்.", "ta"),
        ("RM500", "en"),  # no marker words: English
        ("", "en"),
        ("அவர் 北京 சென்றார்", "ta"),  # Tamil wins over Han when it has more (or as many) letters
        ("我们在 Kuala Lumpur 的办公室", "zh"),  # script beats Latin marker words
        ("Saya dah bayar, thanks", "ms"),
    ],
)
def test_detect_language(text: str, language: str) -> None:
    assert detect_language(text) == language


def test_an_explicit_language_overrides_detection_and_code_switching() -> None:
    assert normalize_spoken("Your balance is RM5.", "ms") == "Your balance is lima ringgit."
    assert normalize_spoken("Baki anda RM5.", "en") == "Baki anda five ringgit."
    assert normalize_spoken("RM5", "zh") == "五令吉"
    assert normalize_spoken("RM5", "ta") == "ஐந்து ரிங்கிட்"
    mixed = "Your balance is RM250, jangan lupa bayar RM80."
    assert normalize_spoken(mixed, "ms") == (
        "Your balance is dua ratus lima puluh ringgit, jangan lupa bayar lapan puluh ringgit."
    )


def test_an_unknown_language_is_an_error() -> None:
    with pytest.raises(ValueError, match="language"):
        normalize_spoken("RM5", "fr")


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        # the word a number hangs on decides: "pukul" (Malay), "at" and "is" (English)
        ("Boss, meeting kita pukul 3pm, but please come early.",
         "Boss, meeting kita pukul tiga petang, but please come early."),
        ("Kita jumpa kat lobby at 2:30pm ya.", "Kita jumpa kat lobby at two thirty p m ya."),
        (
            "Your balance is RM250, jangan lupa bayar RM80.",
            "Your balance is two hundred fifty ringgit, jangan lupa bayar lapan puluh ringgit.",
        ),
        # a bare number is read with the noun it counts
        ("Saya dah call 3 kali but nobody answered.", "Saya dah call tiga kali but nobody answered."),
        ("Saya nak book table untuk 6 orang at 8pm.", "Saya nak book table untuk enam orang at eight p m."),
        # a month spelled the Malay way votes Malay
        ("Yes, your appointment pada 12 Mei confirmed.",
         "Yes, your appointment pada dua belas Mei confirmed."),
        # "I", "you" and particles vote for neither language
        ("Nombor IC you 900101-14-5678 kan?",
         "Nombor IC you sembilan kosong kosong satu kosong satu satu empat lima enam tujuh lapan kan?"),
        # colloquial Malay (aku, kau, tadi) votes Malay
        ("Aku transfer RM150 kat kau tadi, check la.",
         "Aku transfer seratus lima puluh ringgit kat kau tadi, check la."),
        # Malaysian address words vote Malay; "samb." does not end the sentence
        ("Unit A-3-5, Blok B, Tkt 3, Menara XYZ.", "Unit A tiga lima, Blok B, Tingkat tiga, Menara XYZ."),
        ("Sila hubungi kami di talian 03-8888 9999 samb. 123.",
         "Sila hubungi kami di talian kosong tiga lapan lapan lapan lapan sembilan sembilan sembilan "
         "sembilan sambungan satu dua tiga."),
        # "kg" is a unit, not a vote for Malay (Kg. Kampung)
        ("BMI 24.5, 70 kg.", "BMI twenty four point five, seventy kilograms."),
        # a dotted time after "at" is a clock time, in the language of its neighbours
        ("Jom lunch at 12.30, I belanja.", "Jom lunch at twelve thirty, I belanja."),
    ],
)  # fmt: skip
def test_code_switched_numbers_follow_their_neighbours(text: str, spoken: str) -> None:
    assert normalize_spoken(text) == spoken


def test_each_sentence_has_its_own_language() -> None:
    assert normalize_spoken("Your balance is RM50. 您的余额是RM50。") == (
        "Your balance is fifty ringgit. 您的余额是五十令吉。"
    )
    assert normalize_spoken("Baki anda RM50. Your balance is RM50.") == (
        "Baki anda lima puluh ringgit. Your balance is fifty ringgit."
    )
    # the dot of an abbreviation does not end a sentence
    assert (
        normalize_spoken("Dr. Aminah akan tiba pukul 11 pagi.")
        == "Doktor Aminah akan tiba pukul sebelas pagi."
    )


def test_abbreviations_are_expanded_in_the_span_language() -> None:
    assert normalize_spoken("Dr. Lim will call.") == "Doctor Lim will call."
    assert normalize_spoken("Dr. Lim akan hubungi anda.") == "Doktor Lim akan hubungi anda."
    assert normalize_spoken("Dr. Tan会见您。") == "Dr. Tan会见您。"  # Latin titles stay in Mandarin text
