"""Malay phrasing: "seribu dua ratus lima puluh ringgit lima puluh sen", "tiga petang",
"dua belas September dua ribu dua puluh enam". Malay has no plural; "per" units take se-
("lima ringgit sekilogram", "kilometer sejam").

Times of day: pagi (a.m.), tengah hari (12 and 1 p.m.), petang (2-6 p.m.), malam (7-11 p.m.),
tengah malam (12 a.m.); minutes 1-9 as "kosong lima".
"""

from __future__ import annotations

from typing import ClassVar

from app.text.spoken import numbers_ms
from app.text.spoken.speaker import Speaker

__all__ = ["Malay"]

_MONTHS = (
    "Januari", "Februari", "Mac", "April", "Mei", "Jun", "Julai", "Ogos", "September", "Oktober",
    "November", "Disember",
)  # fmt: skip
_FRACTIONS = {(1, 2): "setengah", (1, 4): "suku", (3, 4): "tiga suku"}


def _same(word: str) -> tuple[str, str]:
    return "{n} " + word, "{n} " + word


class Malay(Speaker):
    code = "ms"
    numbers = numbers_ms
    minus_word = "negatif"
    to_word = "hingga"
    star_word = "bintang"
    hash_word = "pagar"
    approx_word = "lebih kurang"
    and_word = "dan"
    copyright_word = "hak cipta"
    at_word = "pada"
    comparison_words: ClassVar[dict[str, str]] = {
        "≥": "sekurang-kurangnya",
        "≤": "paling banyak",
        "<": "kurang daripada",
        ">": "lebih daripada",
        "±": "tambah tolak",
        "≈": "lebih kurang",
    }
    arithmetic_words: ClassVar[dict[str, str]] = {
        "+": "tambah",
        "-": "tolak",
        "×": "darab",
        "÷": "bahagi",
        "=": "sama dengan",
    }
    weekdays = ("Isnin", "Selasa", "Rabu", "Khamis", "Jumaat", "Sabtu", "Ahad")
    months = _MONTHS
    or_more_template = "{n} ke atas"
    out_of_template = "{a} daripada {b}"
    feet_inches_template = "{ft} kaki {inch} inci"
    ratio_word = "berbanding"
    percent_template = "{n} peratus"
    point_word = "titik"
    address_dot_word = "titik"
    plus_word = "tambah"
    grade_signs = ("plus", "minus")
    blood_signs = ("positif", "negatif")
    number_template = "nombor {n}"
    times_template = "{n} kali"
    by_word = "darab"
    version_word = "versi"
    slash_word = "garis miring"
    scale_words: ClassVar[dict[str, str]] = {"m": "juta", "b": "bilion", "t": "trilion"}
    units: ClassVar[dict[str, tuple[str, str]]] = {
        "km": _same("kilometer"), "m": _same("meter"), "cm": _same("sentimeter"), "mm": _same("milimeter"),
        "kg": _same("kilogram"), "g": _same("gram"), "mg": _same("miligram"), "l": _same("liter"),
        "ml": _same("mililiter"), "gb": _same("gigabait"), "mb": _same("megabait"), "tb": _same("terabait"),
        "kb": _same("kilobait"), "mbps": _same("megabit sesaat"), "kmh": _same("kilometer sejam"),
        "c": _same("darjah Celsius"), "f": _same("darjah Fahrenheit"), "deg": _same("darjah"),
        "tbsp": _same("sudu besar"), "tsp": _same("sudu kecil"),
        "mah": _same("miliampere jam"), "kw": _same("kilowatt"), "w": _same("watt"),
        "mmhg": _same("milimeter merkuri"), "bpm": _same("denyutan seminit"),
        "mmol": _same("milimol seliter"),
        "ghz": _same("gigahertz"), "mhz": _same("megahertz"), "hz": _same("hertz"),
        "ft": _same("kaki"), "pts": _same("mata"), "mbs": _same("megabait sesaat"),
        "gbs": _same("gigabait sesaat"),
        "kwh": _same("kilowatt jam"),
        "min": _same("minit"), "hr": _same("jam"), "sec": _same("saat"), "sqft": _same("kaki persegi"),
        "bmi": _same("kilogram per meter persegi"),
        "lb": _same("paun"), "oz": _same("auns"), "mph": _same("batu sejam"), "mi": _same("batu"),
        "sen": _same("sen"), "kcal": _same("kilokalori"),
        "msec": _same("milisaat"), "mth": _same("bulan"), "yr": _same("tahun"), "wk": _same("minggu"),
        "m2": _same("meter persegi"), "km2": _same("kilometer persegi"),
    }  # fmt: skip
    per_units: ClassVar[dict[str, str]] = {
        "kg": "{n} sekilogram", "g": "{n} segram", "km": "{n} sekilometer", "l": "{n} seliter",
        "hr": "{n} sejam", "month": "{n} sebulan", "day": "{n} sehari", "year": "{n} setahun",
        "night": "{n} semalam", "person": "{n} seorang",
    }  # fmt: skip
    currencies: ClassVar[dict[str, tuple[str, str, str, str]]] = {
        "rm": ("ringgit", "ringgit", "sen", "sen"),
        "dollar": ("dolar", "dolar", "sen", "sen"),
        "usd": ("dolar Amerika", "dolar Amerika", "sen", "sen"),
        "sgd": ("dolar Singapura", "dolar Singapura", "sen", "sen"),
        "aud": ("dolar Australia", "dolar Australia", "sen", "sen"),
        "eur": ("euro", "euro", "sen", "sen"),
        "gbp": ("paun", "paun", "peni", "peni"),
        "jpy": ("yen", "yen", "", ""),
        "yen_sign": ("yen", "yen", "", ""),
        "inr": ("rupee", "rupee", "paisa", "paisa"),
        "cny": ("yuan", "yuan", "", ""),
        "thb": ("baht", "baht", "satang", "satang"),
        "hkd": ("dolar Hong Kong", "dolar Hong Kong", "sen", "sen"),
        "twd": ("dolar Taiwan", "dolar Taiwan", "sen", "sen"),
        "krw": ("won", "won", "", ""),
        "idr": ("rupiah", "rupiah", "sen", "sen"),
    }

    def time(self, hour: int, minute: int, period: str | None) -> str:
        """For example "tiga petang", "sepuluh tiga puluh pagi", "sembilan kosong lima"."""
        words = [self.cardinal(hour)]
        if minute:
            words.append(f"kosong {numbers_ms.DIGITS[minute]}" if minute < 10 else self.cardinal(minute))
        if period == "am":
            words.append("tengah malam" if hour == 12 else "pagi")
        elif period == "pm":
            words.append("tengah hari" if hour in (12, 1) else "petang" if hour <= 6 else "malam")
        return " ".join(words)

    def date(self, day: int, month: int, year: int | None) -> str:
        """For example "dua belas September dua ribu dua puluh enam"."""
        spoken = f"{self.cardinal(day)} {_MONTHS[month - 1]}"
        return f"{spoken} {self.cardinal(year)}" if year else spoken

    def day_of_month(self, day: int, month: int | None, year: int | None) -> str:
        """ "3hb Ogos" -> "tiga hari bulan Ogos" (hb, hari bulan, is said in full)."""
        month_name = _MONTHS[month - 1] if month else ""
        return self.join([self.cardinal(day), "hari bulan", month_name, self.cardinal(year) if year else ""])

    def fraction(self, numerator: int, denominator: int) -> str:
        """For example "setengah", "suku", "tiga suku", otherwise "dua per tiga"."""
        known = _FRACTIONS.get((numerator, denominator))
        return known or f"{self.cardinal(numerator)} per {self.cardinal(denominator)}"
