"""The call-centre classes, each in every language where it applies (inputs not in the corpus).

Signed amounts, version strings, hashtags and mentions, road numbers with a slash, vehicle plates, Malay
"hb" dates, Tamil joined compounds and "pukul" before Malay clock times; and the readings they must not
take over (a range, a date, an OTP, a year after a code).
"""

from __future__ import annotations

import pytest

from app.text.spoken import normalize_spoken, numbers_ta

# (text, language, spoken): language "auto" lets the sentence (or its words) decide
SIGNED = [
    ("Balance -RM7.05", "en", "Balance minus seven ringgit five sen"),
    ("Balance RM -7.05", "en", "Balance minus seven ringgit five sen"),
    ("Refund +RM12", "en", "Refund plus twelve ringgit"),
    ("Owe −$3", "en", "Owe minus three dollars"),
    ("Change of +4 and -2.5%", "en", "Change of plus four and minus two point five percent"),
    ("Baki -RM7.05", "ms", "Baki negatif tujuh ringgit lima sen"),
    ("Kredit +RM12", "ms", "Kredit tambah dua belas ringgit"),
    ("余额-RM7.05", "zh", "余额负七令吉五仙"),
    ("余额+RM12", "zh", "余额加十二令吉"),
    ("இருப்பு -RM7.05", "ta", "இருப்பு மைனஸ் ஏழு ரிங்கிட் ஐந்து சென்"),
    ("Baki you -RM7.05, please bayar.", "auto", "Baki you negatif tujuh ringgit lima sen, please bayar."),
]
VERSIONS = [
    ("Get v7.2 now", "en", "Get version seven point two now"),
    ("Get V10.0.11 now", "en", "Get version ten point zero point eleven now"),
    ("Now on version 3.10", "en", "Now on version three point ten"),
    ("Install v5", "en", "Install version five"),
    ("Muat turun v7.2", "ms", "Muat turun versi tujuh titik dua"),
    ("Versi 3.10 baharu", "ms", "Versi tiga titik sepuluh baharu"),
    ("更新到v7.2", "zh", "更新到版本七点二"),
    ("v7.2版本", "zh", "七点二版本"),
    ("பதிப்பு v7.2", "ta", "பதிப்பு ஏழு புள்ளி இரண்டு"),
    ("v7.2 தயார்", "ta", "பதிப்பு ஏழு புள்ளி இரண்டு தயார்"),
]
TAGS = [
    ("Use #MegaSale2027", "en", "Use hashtag Mega Sale twenty twenty seven"),
    ("Ask @CelcomCare", "en", "Ask at Celcom Care"),
    ("Ask @unifi_my", "en", "Ask at unifi underscore my"),
    ("Guna #MegaSale2027", "ms", "Guna hashtag Mega Sale dua ribu dua puluh tujuh"),
    ("使用#MegaSale2027", "zh", "使用hashtag Mega Sale二零二七"),
    ("#MegaSale2027 பயன்படுத்தவும்", "ta", "hashtag Mega Sale இரண்டாயிரத்து இருபத்தேழு பயன்படுத்தவும்"),
    ("Ticket #A12-3456", "en", "Ticket number A twelve three four five six"),
    ("Order #ORD123456", "en", "Order number O R D one two three four five six"),
    ("#5 in the list", "en", "number five in the list"),
]
ROADS = [
    ("Jalan 9/3, Klang", "en", "Jalan nine slash three, Klang"),
    ("Jln. SS 21/37", "en", "Jalan S S twenty one slash thirty seven"),
    ("Lorong Mawar 4/2B", "en", "Lorong Mawar four slash two B"),
    ("Jalan 9/3, Klang", "ms", "Jalan sembilan garis miring tiga, Klang"),
    ("Jalan PJU 7/16A", "ms", "Jalan P J U tujuh garis miring enam belas A"),
    ("Jalan 9/3", "zh", "Jalan 九斜杠三"),
    ("Jalan 9/3", "ta", "Jalan ஒன்பது ஸ்லாஷ் மூன்று"),
    ("on 9/3", "en", "on the ninth of March"),  # no road word: still a date
]
PLATES = [
    ("Car WVX 7721 is here", "en", "Car W V X seven seven two one is here"),
    ("Car PJ 40 is here", "en", "Car P J four zero is here"),
    ("Kereta WVX 7721", "ms", "Kereta W V X tujuh tujuh dua satu"),
    ("车牌WVX 7721", "zh", "车牌WVX七七二一"),
    ("கார் WVX 7721", "ta", "கார் W V X ஏழு ஏழு இரண்டு ஒன்று"),
    ("Your OTP 7721", "en", "Your OTP seven seven two one"),  # an OTP, not a plate
    ("Sat SPM 2024", "en", "Sat SPM two thousand twenty four"),  # a year, not a plate
]
HB_DATES = [
    ("Pada 9hb Mac", "ms", "Pada sembilan hari bulan Mac"),
    ("Pada 21 hb. Julai 2027", "ms", "Pada dua puluh satu hari bulan Julai dua ribu dua puluh tujuh"),
    ("Setiap 5hb", "ms", "Setiap lima hari bulan"),
    ("Dari 1hb-3hb Mei", "ms", "Dari satu hari bulan hingga tiga hari bulan Mei"),
    ("Dated 9hb March", "en", "Dated the ninth of March"),
    ("在9hb Mac", "zh", "在三月九日"),
    ("9hb Mac அன்று", "ta", "ஒன்பது மார்ச் அன்று"),
    ("Due 9hb Mac, jangan lupa bayar.", "auto", "Due sembilan hari bulan Mac, jangan lupa bayar."),
    ("Due 9hb March, please pay.", "auto", "Due the ninth of March, please pay."),  # an English sentence
]
PUKUL = [
    ("Buka 9am", "ms", "Buka pukul sembilan pagi"),
    ("Buka 9am-6pm", "ms", "Buka pukul sembilan pagi hingga enam petang"),
    ("Buka 9am hingga 6pm", "ms", "Buka pukul sembilan pagi hingga enam petang"),
    ("Tutup pukul 6pm", "ms", "Tutup pukul enam petang"),
    ("Tutup jam 6pm", "ms", "Tutup jam enam petang"),
    ("Sampai 18:30 nanti", "ms", "Sampai pukul enam tiga puluh petang nanti"),
    ("Datang sebelum 4 petang", "ms", "Datang sebelum pukul empat petang"),
    ("Menginap 2 malam", "ms", "Menginap dua malam"),  # two nights, not a time
    ("Antara 2-4 petang", "ms", "Antara pukul dua hingga empat petang"),
    ("Open 9am", "en", "Open nine a m"),  # English takes no pukul
    ("Kedai kami buka 9am, see you!", "auto", "Kedai kami buka pukul sembilan pagi, see you!"),
]
FURTHER = [
    ("Track JT123456789MY", "en", "Track J T one two three four five six seven eight nine M Y"),
    ("Ref INV/2026/0042", "en", "Ref I N V two zero two six zero zero four two"),
    ("Due 03.04.2027", "en", "Due the third of April twenty twenty seven"),
    ("Due 2027/04/03", "en", "Due the third of April twenty twenty seven"),
    ("Pada 03-04-2027", "ms", "Pada tiga April dua ribu dua puluh tujuh"),
    ("RM2k-RM3.5k", "en", "two thousand to three thousand five hundred ringgit"),
    ("Had 110 km/j", "ms", "Had seratus sepuluh kilometer sejam"),
    ("Size 900 sq ft", "en", "Size nine hundred square feet"),
    ("Yang ke-7", "ms", "Yang ketujuh"),
    ("Kadar 2.75%", "ms", "Kadar dua perpuluhan tujuh lima peratus"),
]


@pytest.mark.parametrize(("text", "language", "spoken"), SIGNED)
def test_signed_amounts_keep_their_sign_in_words(text: str, language: str, spoken: str) -> None:
    assert normalize_spoken(text, language) == spoken


@pytest.mark.parametrize(("text", "language", "spoken"), VERSIONS)
def test_versions_are_read_part_by_part(text: str, language: str, spoken: str) -> None:
    assert normalize_spoken(text, language) == spoken


@pytest.mark.parametrize(("text", "language", "spoken"), TAGS)
def test_hashtags_and_mentions(text: str, language: str, spoken: str) -> None:
    assert normalize_spoken(text, language) == spoken


@pytest.mark.parametrize(("text", "language", "spoken"), ROADS)
def test_road_numbers_speak_the_slash(text: str, language: str, spoken: str) -> None:
    assert normalize_spoken(text, language) == spoken


@pytest.mark.parametrize(("text", "language", "spoken"), PLATES)
def test_plates_are_read_digit_by_digit(text: str, language: str, spoken: str) -> None:
    assert normalize_spoken(text, language) == spoken


@pytest.mark.parametrize(("text", "language", "spoken"), HB_DATES)
def test_malay_hb_dates(text: str, language: str, spoken: str) -> None:
    assert normalize_spoken(text, language) == spoken


@pytest.mark.parametrize(("text", "language", "spoken"), PUKUL)
def test_malay_clock_times_take_pukul(text: str, language: str, spoken: str) -> None:
    assert normalize_spoken(text, language) == spoken


@pytest.mark.parametrize(("text", "language", "spoken"), FURTHER)
def test_further_call_centre_classes(text: str, language: str, spoken: str) -> None:
    assert normalize_spoken(text, language) == spoken


@pytest.mark.parametrize(
    ("n", "spoken"),
    [
        (22, "இருபத்திரண்டு"),
        (36, "முப்பத்தாறு"),
        (48, "நாற்பத்தெட்டு"),
        (55, "ஐம்பத்தைந்து"),
        (67, "அறுபத்தேழு"),
        (79, "எழுபத்தொன்பது"),
        (91, "தொண்ணூற்றொன்று"),
        (43, "நாற்பத்து மூன்று"),  # a unit that starts with a consonant stays a word of its own
        (84, "எண்பத்து நான்கு"),
        (31_000, "முப்பத்தோராயிரம்"),
        (99_999, "தொண்ணூற்றொன்பதாயிரத்து தொள்ளாயிரத்து தொண்ணூற்றொன்பது"),
        (2_100_000, "இருபத்தொரு லட்சம்"),
    ],
)
def test_tamil_tens_and_units_are_joined(n: int, spoken: str) -> None:
    assert numbers_ta.cardinal(n) == spoken


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("RM31", "முப்பத்தொரு ரிங்கிட்"),
        ("45ஆம்", "நாற்பத்தைந்தாம்"),
        ("2028இல்", "இரண்டாயிரத்து இருபத்தெட்டில்"),
        ("11 நாட்கள்", "பதினொரு நாட்கள்"),
    ],
)
def test_tamil_joined_forms_in_sentences(text: str, spoken: str) -> None:
    assert normalize_spoken(text, "ta") == spoken


@pytest.mark.parametrize(
    "text",
    [row[0] for rows in (SIGNED, VERSIONS, TAGS, ROADS, PLATES, HB_DATES, PUKUL, FURTHER) for row in rows],
)
def test_new_classes_leave_no_digit_and_are_fixed_points(text: str) -> None:
    once = normalize_spoken(text)
    assert not any(c.isdigit() for c in once)
    assert normalize_spoken(once) == once


def test_the_third_corpus_batch_covers_each_class() -> None:
    from bench.normalizer_corpus import CORPUS

    third = [case for case in CORPUS if case.batch == "third"]
    assert len(third) >= 150
    for kind in ("signed", "version", "hashtag", "road", "plate", "hb", "compound", "pukul"):
        assert sum(kind in case.entities for case in third) >= 15, kind
    assert {case.language for case in third} == {"en", "ms", "zh", "ta", "cs"}
