"""Common abbreviations of Malaysian English and Malay text, expanded in the span's language.

Titles and address words are expanded only where the next word makes the reading certain (a
capitalised name, a number), a road's type only after its name ("Old Klang Rd."); Mandarin and Tamil
text keeps Latin-script titles as written and only expands company suffixes. Keys are the written form
without dots and spaces.
"""

from __future__ import annotations

__all__ = ["ABBREVIATION", "SENTENCE_FINAL", "expand"]

# key -> (English, Malay, every other language or None to keep as written)
_TABLE: dict[str, tuple[str, str, str | None]] = {
    "SdnBhd": ("Sendirian Berhad", "Sendirian Berhad", "Sendirian Berhad"),
    "Bhd": ("Berhad", "Berhad", "Berhad"),
    "Dr": ("Doctor", "Doktor", None),
    "Prof": ("Professor", "Profesor", None),
    "Mr": ("Mister", "Mister", None),
    "Mrs": ("Missus", "Missus", None),
    "En": ("Encik", "Encik", None),
    "Pn": ("Puan", "Puan", None),
    "Tn": ("Tuan", "Tuan", None),
    "Hj": ("Haji", "Haji", None),
    "Hjh": ("Hajah", "Hajah", None),
    "Jln": ("Jalan", "Jalan", None),
    "Tmn": ("Taman", "Taman", None),
    "Lrg": ("Lorong", "Lorong", None),
    "Kg": ("Kampung", "Kampung", None),
    "Kpg": ("Kampung", "Kampung", None),
    "Tkt": ("Tingkat", "Tingkat", None),
    "Sek": ("Seksyen", "Seksyen", None),
    "Bgn": ("Bangunan", "Bangunan", None),
    "Bkt": ("Bukit", "Bukit", None),
    "Sg": ("Sungai", "Sungai", None),
    "Bdr": ("Bandar", "Bandar", None),
    "Tg": ("Tanjung", "Tanjung", None),
    "Lbh": ("Lebuh", "Lebuh", None),
    "Psn": ("Persiaran", "Persiaran", None),
    "Kws": ("Kawasan", "Kawasan", None),
    "St": ("Street", "Street", None),  # after a road's name; before a name "Saint" (``entities``)
    "Rd": ("Road", "Road", None),
    "Ave": ("Avenue", "Avenue", None),
    "Blvd": ("Boulevard", "Boulevard", None),
    "Hwy": ("Highway", "Highway", None),
    "WP": ("Wilayah Persekutuan", "Wilayah Persekutuan", None),
    "samb": ("extension", "sambungan", None),
    "eg": ("for example", "contohnya", None),
    "ie": ("that is", "iaitu", None),
    "etc": ("et cetera", "dan lain-lain", None),
    "vs": ("versus", "lawan", None),
    "approx": ("approximately", "lebih kurang", None),
    "min": ("minimum", "minimum", None),
    "Min": ("Minimum", "Minimum", None),
    "max": ("maximum", "maksimum", None),
    "Max": ("Maximum", "Maksimum", None),
    "maks": ("maximum", "maksimum", None),
    "Maks": ("Maximum", "Maksimum", None),
    "incl": ("including", "termasuk", None),
    "Approx": ("Approximately", "Lebih kurang", None),
    "Incl": ("Including", "Termasuk", None),
    "Excl": ("Excluding", "Tidak termasuk", None),
    "excl": ("excluding", "tidak termasuk", None),
    "dll": ("dan lain-lain", "dan lain-lain", None),
    "dsb": ("dan sebagainya", "dan sebagainya", None),
    "cth": ("contohnya", "contohnya", None),
    "Ext": ("extension", "sambungan", None),
    "ext": ("extension", "sambungan", None),
    "pa": ("per annum", "setahun", None),
    "mlm": ("malam", "malam", None),
    "w/": ("with", "dengan", None),
    "w/o": ("without", "tanpa", None),
    # growth rates, read after a percentage ("5% y/y"; ``entities``: a "MoM" alone is a meeting's minutes)
    "y/y": ("year on year", "tahun ke tahun", None),
    "YoY": ("year on year", "tahun ke tahun", None),
    "q/q": ("quarter on quarter", "suku ke suku", None),
    "QoQ": ("quarter on quarter", "suku ke suku", None),
    "m/m": ("month on month", "bulan ke bulan", None),
    "MoM": ("month on month", "bulan ke bulan", None),
}
# abbreviations whose dot may also end the sentence: the dot is kept there
SENTENCE_FINAL = frozenset({"etc", "dll", "dsb", "St", "Rd", "Ave", "Blvd", "Hwy"})

_NAME = r"(?=\s[A-Z])"
ABBREVIATION = "|".join(
    (
        r"(?<![A-Za-z_.])Sdn\.?\s?Bhd\.?(?!\w)",
        r"(?<![A-Za-z_.])Bhd\.?(?!\w)",
        rf"(?<![A-Za-z_.])(?:Dr|Prof|Mr|Mrs|Hj)(?:\.|{_NAME})",
        rf"(?<![A-Za-z_.])(?:En|Pn|Tn|Hjh)\.{_NAME}",
        r"(?<![A-Za-z_.])(?:Jln|Lrg)\.?(?=\s[A-Z0-9])",
        rf"(?<![A-Za-z_.])(?:Tmn|Kg|Kpg|Bgn|Bkt|Sg|Bdr|Tg|Lbh|Psn|Kws)\.?{_NAME}",
        r"(?<=[A-Za-z0-9] )(?:Rd|Ave|Blvd|Hwy)\.?(?![\w&@-])",  # "Old Klang Rd."
        r"(?<![A-Za-z_.])St\.(?=\s[A-Z]|[\s,;:)]|$)",  # "Main St.", "St. Mary"
        r"(?<![A-Za-z_.])(?:Tkt|Sek)\.?(?=\s[A-Z0-9])",
        r"(?<![A-Za-z_.])W\.P\.(?=\s[A-Z])",
        r"(?<![A-Za-z_.])samb\.?(?=\s?\d)",
        r"(?<![A-Za-z_.])(?:e\.g|i\.e|etc|[Aa]pprox|[Ii]ncl|[Ee]xcl|cth|p\.a)\.",
        r"(?<![A-Za-z_.])(?:dll|dsb)\.?(?!\w)",
        r"(?<![A-Za-z_.])vs\.?(?=\s)",
        # "min. RM10", "maks 3" (after a number "min" is minutes)
        r"(?<![\w.])(?<!\d )(?:[Mm]in|[Mm]ax|[Mm]aks)\.?(?=\s?(?:RM|\$|\d))",
        r"(?<![A-Za-z_.])[Ee]xt\.?(?=\s?\d)",
        r"(?<=\d )mlm(?!\w)",  # nights, "3 hari 2 mlm" (a clock time takes it first: "8.30 mlm")
        r"(?<![\w/])w/o?(?=\s)",  # "coffee w/ milk", "w/o sugar"
    )
)


def expand(written: str, language: str) -> str:
    """The spoken form of one matched abbreviation in ``language`` (the written form if none)."""
    english, malay, other = _TABLE[written.replace(".", "").replace(" ", "")]
    if language == "en":
        return english
    if language == "ms":
        return malay
    return other or written
