"""The load benchmark's fixed evaluation set: 16 sentences a voice agent might say, short to long.

Six English, six Malay and four Malay/English code-switched sentences, written for this project. They
include a few numbers, times and amounts, so the text front end does some work, and range from about
one second to about ten seconds of speech. ``bench/bench.py`` cycles through them in order, so every
run at every level sends the same mix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class EvalSentence:
    """One sentence of the set and its language (``mixed`` = Malay/English code-switch)."""

    id: str
    language: Literal["en", "ms", "mixed"]
    text: str


EVALSET: tuple[EvalSentence, ...] = (
    EvalSentence("en-01", "en", "Good morning, how may I help you?"),
    EvalSentence("ms-01", "ms", "Selamat petang, ada apa yang boleh saya bantu?"),
    EvalSentence("mixed-01", "mixed", "Okay boss, nanti saya check dulu and call you back."),
    EvalSentence("en-02", "en", "Your parcel left our warehouse this morning and should arrive on Friday."),
    EvalSentence(
        "ms-02",
        "ms",
        "Baki akaun anda ialah RM250.40, dan bil seterusnya perlu dibayar sebelum 15 haribulan.",
    ),
    EvalSentence(
        "en-03",
        "en",
        "I have moved your appointment to Tuesday at 3pm; you will get a reminder message the day before.",
    ),
    EvalSentence(
        "mixed-02",
        "mixed",
        "Sorry ya, sistem kami down sekejap, so boleh tak you try lagi dalam ten minutes?",
    ),
    EvalSentence(
        "ms-03",
        "ms",
        "Terima kasih kerana menunggu. Pegawai kami akan menghubungi anda dalam masa dua hari bekerja.",
    ),
    EvalSentence(
        "en-04",
        "en",
        "To reset your password, open the app, tap on settings, choose security, "
        "and follow the steps on the screen.",
    ),
    EvalSentence(
        "ms-04",
        "ms",
        "Untuk menukar alamat surat-menyurat, sila bawa kad pengenalan anda ke mana-mana cawangan "
        "kami yang berdekatan.",
    ),
    EvalSentence(
        "mixed-03",
        "mixed",
        "Kalau you nak upgrade plan, the new package is RM99 a month, dan data dia unlimited.",
    ),
    EvalSentence(
        "en-05",
        "en",
        "The outage in your area was caused by planned maintenance. Our engineers expect the service "
        "to be back by six this evening, and we are sorry for the trouble.",
    ),
    EvalSentence(
        "ms-05",
        "ms",
        "Permohonan pinjaman anda telah diterima. Kami akan menyemak dokumen yang dihantar dan "
        "memaklumkan keputusannya melalui e-mel dalam tempoh tujuh hari.",
    ),
    EvalSentence(
        "en-06",
        "en",
        "Before we continue, may I confirm a few details? Please tell me your full name, the last four "
        "digits of your phone number, and the postcode of your billing address.",
    ),
    EvalSentence(
        "ms-06",
        "ms",
        "Kami ingin memaklumkan bahawa waktu operasi pusat panggilan akan berubah mulai bulan depan. "
        "Kami dibuka dari pukul lapan pagi hingga sepuluh malam, setiap hari termasuk cuti umum.",
    ),
    EvalSentence(
        "mixed-04",
        "mixed",
        "Boleh, saya boleh tolong you dengan itu. First, saya perlu verify identiti you, then kita "
        "tukar nombor telefon dalam sistem, and lepas tu you akan dapat SMS untuk confirm.",
    ),
)
