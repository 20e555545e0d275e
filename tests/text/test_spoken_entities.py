"""Every entity type of the spoken normalizer in every language (language given explicitly)."""

from __future__ import annotations

import pytest

from app.text.spoken import normalize_spoken

ENGLISH = [
    ("RM1,250.50", "one thousand two hundred fifty ringgit fifty sen"),
    ("RM0.05", "five sen"),
    ("$1", "one dollar"),
    ("$0.01", "one cent"),
    ("£2.50", "two pounds fifty pence"),
    ("USD 100", "one hundred US dollars"),
    ("SGD 20", "twenty Singapore dollars"),
    ("¥500", "five hundred yen"),
    ("RM2.5 million", "two point five million ringgit"),
    ("RM1.2k", "one thousand two hundred ringgit"),
    ("RM100-200", "one hundred to two hundred ringgit"),
    ("RM5/kg", "five ringgit per kilogram"),
    ("850712-14-5523", "eight five zero seven one two one four five five two three"),
    ("+6012-345 6789", "plus six zero one two three four five six seven eight nine"),
    ("1-800-88-1234", "one eight zero zero eight eight one two three four"),
    ("12/9/2026", "the twelfth of September twenty twenty six"),
    ("2026-09-12", "the twelfth of September twenty twenty six"),
    ("12 Sep 2026", "the twelfth of September twenty twenty six"),
    ("September 12", "September twelfth"),
    ("3pm", "three p m"),
    ("9:05am", "nine oh five a m"),
    ("14:05", "two oh five p m"),
    ("0:30", "twelve thirty a m"),
    ("9:00", "nine o'clock"),
    ("9am-5pm", "nine a m to five p m"),
    ("12.5%", "twelve point five percent"),
    ("3.14", "three point one four"),
    ("22nd", "twenty second"),
    ("5-10 days", "five to ten days"),
    ("3/4", "three quarters"),
    ("5/16", "five over sixteen"),
    ("½", "one half"),
    ("1 kg", "one kilogram"),
    ("2 kg", "two kilograms"),
    ("30 x 20 cm", "thirty by twenty centimetres"),
    ("20m²", "twenty square metres"),
    ("a.b@c.com", "a dot b at c dot com"),
    ("https://example.com/help-centre", "example dot com slash help dash centre"),
    ("A12B45", "A one two B four five"),
    ("OTP 0042", "OTP zero zero four two"),
    ("order 123456", "order one two three four five six"),
    ("e.g. this", "for example this"),
    ("Mr. Tan", "Mister Tan"),
    ("1,000,000", "one million"),
    ("since 1999", "since nineteen ninety nine"),
    ("version 2.0.1", "version two point zero point one"),
    ("the 80s", "the eighties"),
    ("-3", "minus three"),
    ("3x", "three times"),
    ("5k", "five thousand"),
    ("#12", "number twelve"),
]

MALAY = [
    ("RM1,250.50", "seribu dua ratus lima puluh ringgit lima puluh sen"),
    ("RM1 juta", "satu juta ringgit"),
    ("$5", "lima dolar"),
    ("RM50/bulan", "lima puluh ringgit sebulan"),
    ("850712-14-5523", "lapan lima kosong tujuh satu dua satu empat lima lima dua tiga"),
    ("+6012-345 6789", "tambah enam kosong satu dua tiga empat lima enam tujuh lapan sembilan"),
    ("12/9/2026", "dua belas September dua ribu dua puluh enam"),
    ("1 Ogos", "satu Ogos"),
    ("3pm", "pukul tiga petang"),
    ("8pm", "pukul lapan malam"),
    ("12pm", "pukul dua belas tengah hari"),
    ("9:05am", "pukul sembilan kosong lima pagi"),
    ("3.30 petang", "pukul tiga tiga puluh petang"),
    ("pukul 3.30", "pukul tiga tiga puluh"),
    ("12.5%", "dua belas perpuluhan lima peratus"),
    ("3.14", "tiga perpuluhan satu empat"),
    ("ke-22", "kedua puluh dua"),
    ("5-10 hari", "lima hingga sepuluh hari"),
    ("2/3", "dua per tiga"),
    ("1 kg", "satu kilogram"),
    ("30 x 20 cm", "tiga puluh darab dua puluh sentimeter"),
    ("a.b@c.com", "a dot b at c dot com"),
    ("www.jpj.gov.my", "w w w dot jpj dot gov dot my"),
    ("A12B45", "A satu dua B empat lima"),
    ("akaun 0042", "akaun kosong kosong empat dua"),
    ("En. Ali", "Encik Ali"),
    ("buku, pen dsb.", "buku, pen dan sebagainya."),
    ("1,000,000", "satu juta"),
    ("tahun 1999", "tahun seribu sembilan ratus sembilan puluh sembilan"),
    ("versi 2.0.1", "versi dua titik kosong titik satu"),
    ("1980-an", "seribu sembilan ratus lapan puluhan"),
    ("-3", "negatif tiga"),
    ("3x", "tiga kali"),
    ("5k", "lima ribu"),
    ("No. 8", "Nombor lapan"),
]

MANDARIN = [
    ("RM1,250.50", "一千二百五十令吉五十仙"),
    ("RM2", "两令吉"),
    ("RM2.5 million", "两百五十万令吉"),
    ("€3", "三欧元"),
    ("850712-14-5523", "八五零七一二一四五五二三"),
    ("+6012-345 6789", "加六零一二三四五六七八九"),
    ("12/9/2026", "二零二六年九月十二日"),
    ("2026年9月12日", "二零二六年九月十二日"),
    ("3pm", "下午三点"),
    ("2pm", "下午两点"),
    ("8pm", "晚上八点"),
    ("9:05am", "上午九点零五分"),
    ("12am", "午夜十二点"),
    ("12.5%", "百分之十二点五"),
    ("3.14", "三点一四"),
    ("第22", "第二十二"),
    ("22nd", "第二十二"),
    ("5-10天", "五到十天"),
    ("2/3", "三分之二"),
    ("1kg", "一公斤"),
    ("2kg", "两公斤"),
    ("30°C", "摄氏三十度"),
    ("-5°C", "摄氏零下五度"),
    ("a.b@c.com", "a dot b at c dot com"),
    ("www.jpj.gov.my", "w w w dot jpj dot gov dot my"),
    ("A12B45", "A一二B四五"),
    ("验证码0042", "验证码零零四二"),
    ("1,000,000", "一百万"),
    ("1999年", "一九九九年"),
    ("2.0.1", "二点零点一"),
    ("1980s", "一九八零年代"),
    ("-3", "负三"),
    ("3x", "三倍"),
    ("5k", "五千"),
    ("2个", "两个"),
]

TAMIL = [
    ("RM1,250.50", "ஆயிரத்து இருநூற்று ஐம்பது ரிங்கிட் ஐம்பது சென்"),
    ("RM1", "ஒரு ரிங்கிட்"),
    ("RM21", "இருபத்தொரு ரிங்கிட்"),
    ("850712-14-5523", "எட்டு ஐந்து பூஜ்ஜியம் ஏழு ஒன்று இரண்டு ஒன்று நான்கு ஐந்து ஐந்து இரண்டு மூன்று"),
    ("+6012-345 6789", "பிளஸ் ஆறு பூஜ்ஜியம் ஒன்று இரண்டு மூன்று நான்கு ஐந்து ஆறு ஏழு எட்டு ஒன்பது"),
    ("12/9/2026", "பன்னிரண்டு செப்டம்பர் இரண்டாயிரத்து இருபத்தாறு"),
    ("3pm", "மதியம் மூன்று மணி"),
    ("1pm", "மதியம் ஒரு மணி"),
    ("8pm", "இரவு எட்டு மணி"),
    ("9:05am", "காலை ஒன்பது மணி ஐந்து நிமிடம்"),
    ("12.5%", "பன்னிரண்டு புள்ளி ஐந்து சதவீதம்"),
    ("3.14", "மூன்று புள்ளி ஒன்று நான்கு"),
    ("22ஆம்", "இருபத்திரண்டாம்"),
    ("3வது", "மூன்றாவது"),
    ("5-10 நாட்கள்", "ஐந்து முதல் பத்து நாட்கள்"),
    ("2/3", "மூன்றில் இரண்டு"),
    ("1/2", "அரை"),
    ("1 kg", "ஒரு கிலோகிராம்"),
    ("60 km/h", "மணிக்கு அறுபது கிலோமீட்டர்"),
    ("a.b@c.com", "a dot b at c dot com"),
    ("A12B45", "A ஒன்று இரண்டு B நான்கு ஐந்து"),
    ("1,000,000", "பத்து லட்சம்"),
    ("2026", "இரண்டாயிரத்து இருபத்தாறு"),
    ("2.0.1", "இரண்டு புள்ளி பூஜ்ஜியம் புள்ளி ஒன்று"),
    ("1980s", "ஆயிரத்து தொள்ளாயிரத்து எண்பதுகள்"),
    ("-3", "மைனஸ் மூன்று"),
    ("3x", "மூன்று மடங்கு"),
    ("5k", "ஐயாயிரம்"),
    ("5க்கு", "ஐந்துக்கு"),
    ("RM200க்கு", "இருநூறு ரிங்கிட்டுக்கு"),
]


@pytest.mark.parametrize(("text", "spoken"), ENGLISH)
def test_english(text: str, spoken: str) -> None:
    assert normalize_spoken(text, "en") == spoken


@pytest.mark.parametrize(("text", "spoken"), MALAY)
def test_malay(text: str, spoken: str) -> None:
    assert normalize_spoken(text, "ms") == spoken


@pytest.mark.parametrize(("text", "spoken"), MANDARIN)
def test_mandarin(text: str, spoken: str) -> None:
    assert normalize_spoken(text, "zh") == spoken


@pytest.mark.parametrize(("text", "spoken"), TAMIL)
def test_tamil(text: str, spoken: str) -> None:
    assert normalize_spoken(text, "ta") == spoken


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("Call us on 03-2161 1234.", "Call us on zero three two one six one one two three four."),
        ("Dial 999 now.", "Dial nine nine nine now."),
        ("Room 305.", "Room three hundred five."),
        ("In Q3 2025 we grew.", "In Q three twenty twenty five we grew."),
        ("It ends at 3 p.m.", "It ends at three p m."),
        ("Bring pens, paper, etc.", "Bring pens, paper, et cetera."),
        ("Pay ABC Sdn. Bhd.", "Pay ABC Sendirian Berhad."),
        ("maybank2u", "maybank two U"),
        ("COVID-19 and MH370", "COVID nineteen and M H three seven zero"),
        ("The 1/2 price sale", "The one half price sale"),
        ("on 3/11", "on the third of November"),
        ("at 45/13/2026", "at forty five/thirteen/two thousand twenty six"),
    ],
)
def test_context_decides_the_reading(text: str, spoken: str) -> None:
    assert normalize_spoken(text, "en") == spoken
