"""Mandarin phrasing: "一千二百五十令吉五十仙", "下午三点", "二零二六年九月十二日", "百分之十五".

No spaces between Chinese words (a space stays between two Latin letters or digits); 两 for a bare 2
before a measure word; scales are multiplied out (RM2.5 million -> 两百五十万令吉); units before
the number where Mandarin puts them (摄氏三十度, 每小时八十公里, 每公斤五令吉). Times of day: 上午
(a.m.), 午夜 (12 a.m.), 中午 (12 p.m.), 下午 (1-5 p.m.), 晚上 (6-11 p.m.).
"""

from __future__ import annotations

from typing import ClassVar

from app.text.spoken import numbers_zh
from app.text.spoken.speaker import Speaker

__all__ = ["MEASURE_WORDS", "Mandarin"]

# a bare 2 before one of these is 两: 两点, 两个, 两天
MEASURE_WORDS = (
    "个", "位", "天", "次", "点", "小时", "分钟", "年", "周", "星期", "岁", "张", "份", "件", "间", "本",
    "条", "种", "辆", "台", "瓶", "杯", "碗", "令吉", "公斤", "公里", "千克", "元", "块", "倍", "名",
    "家", "层", "只", "双", "套", "支", "晚", "夜", "个月", "包", "盒", "箱",
)  # fmt: skip


def _same(template: str) -> tuple[str, str]:
    return template, template


class Mandarin(Speaker):
    code = "zh"
    numbers = numbers_zh
    minus_word = "负"
    to_word = "到"
    star_word = "星号"
    hash_word = "井号"
    approx_word = "约"
    and_word = "和"
    copyright_word = "版权"
    comparison_words: ClassVar[dict[str, str]] = {
        "≥": "不少于",
        "≤": "不超过",
        "<": "少于",
        ">": "多于",
        "±": "正负",
        "≈": "约",
    }
    word_space = ""
    arithmetic_words: ClassVar[dict[str, str]] = {
        "+": "加",
        "-": "减",
        "×": "乘",
        "÷": "除以",
        "=": "等于",
    }
    weekdays = ("星期一", "星期二", "星期三", "星期四", "星期五", "星期六", "星期日")
    months = tuple(numbers_zh.cardinal(n) + "月" for n in range(1, 13))  # 一月 ... 十二月
    or_more_template = "{n}以上"
    out_of_template = "{b}分之{a}"
    feet_inches_template = "{ft}英尺{inch}英寸"
    ratio_word = "比"
    percent_template = "百分之{n}"
    point_word = "点"
    address_dot_word = "点"
    plus_word = "加"
    scale_words: ClassVar[dict[str, str]] = {"wan": "万", "qw": "千万", "yi": "亿", "t": "万亿"}
    grade_signs = ("加", "减")
    blood_signs = ("阳性", "阴性")
    number_template = "{n}号"
    times_template = "{n}倍"
    by_word = "乘"
    version_word = "版本"
    slash_word = "斜杠"
    units: ClassVar[dict[str, tuple[str, str]]] = {
        "km": _same("{n}公里"), "m": _same("{n}米"), "cm": _same("{n}厘米"), "mm": _same("{n}毫米"),
        "kg": _same("{n}公斤"), "g": _same("{n}克"), "mg": _same("{n}毫克"), "l": _same("{n}升"),
        "ml": _same("{n}毫升"), "gb": _same("{n}GB"), "mb": _same("{n}MB"), "tb": _same("{n}TB"),
        "kb": _same("{n}KB"), "mbps": _same("{n}Mbps"), "kmh": _same("每小时{n}公里"),
        "c": _same("摄氏{n}度"), "f": _same("华氏{n}度"), "deg": _same("{n}度"), "kwh": _same("{n}千瓦时"),
        "tbsp": _same("{n}汤匙"), "tsp": _same("{n}茶匙"),
        "mah": _same("{n}毫安时"), "kw": _same("{n}千瓦"), "w": _same("{n}瓦"), "ghz": _same("{n}GHz"),
        "mmhg": _same("{n}毫米汞柱"), "bpm": _same("每分钟{n}次"), "mmol": _same("每升{n}毫摩尔"),
        "mhz": _same("{n}MHz"), "hz": _same("{n}赫兹"),
        "ft": _same("{n}英尺"), "pts": _same("{n}分"), "mbs": _same("每秒{n}MB"), "gbs": _same("每秒{n}GB"),
        "min": _same("{n}分钟"),
        "hr": _same("{n}小时"), "sec": _same("{n}秒"), "sqft": _same("{n}平方英尺"), "m2": _same("{n}平方米"),
        "bmi": _same("每平方米{n}公斤"),
        "lb": _same("{n}磅"), "oz": _same("{n}盎司"), "mph": _same("每小时{n}英里"), "mi": _same("{n}英里"),
        "sen": _same("{n}仙"), "kcal": _same("{n}千卡"),
        "msec": _same("{n}毫秒"), "mth": _same("{n}个月"), "yr": _same("{n}年"), "wk": _same("{n}周"),
        "km2": _same("{n}平方公里"),
    }  # fmt: skip
    per_units: ClassVar[dict[str, str]] = {
        "kg": "每公斤{n}", "g": "每克{n}", "km": "每公里{n}", "l": "每升{n}", "hr": "每小时{n}",
        "month": "每月{n}", "day": "每天{n}", "year": "每年{n}", "night": "每晚{n}", "person": "每人{n}",
    }  # fmt: skip
    currencies: ClassVar[dict[str, tuple[str, str, str, str]]] = {
        "rm": ("令吉", "令吉", "仙", "仙"),
        "dollar": ("美元", "美元", "美分", "美分"),
        "usd": ("美元", "美元", "美分", "美分"),
        "sgd": ("新元", "新元", "分", "分"),
        "aud": ("澳元", "澳元", "分", "分"),
        "eur": ("欧元", "欧元", "欧分", "欧分"),
        "gbp": ("英镑", "英镑", "便士", "便士"),
        "jpy": ("日元", "日元", "", ""),
        "yen_sign": ("元", "元", "", ""),
        "inr": ("卢比", "卢比", "", ""),
        "cny": ("元", "元", "", ""),
        "thb": ("泰铢", "泰铢", "", ""),
        "hkd": ("港元", "港元", "仙", "仙"),
        "twd": ("新台币", "新台币", "", ""),
        "krw": ("韩元", "韩元", "", ""),
        "idr": ("印尼盾", "印尼盾", "", ""),
    }

    def join(self, parts: list[str]) -> str:
        out = ""
        for part in parts:
            if part:
                out += " " + part if out and out[-1].isascii() and part[0].isascii() else part
        return out

    def count(self, n: int) -> str:
        return "两" if n == 2 else self.cardinal(n)

    def year(self, n: int) -> str:
        return self.digits(str(n))

    def unit(self, spoken: str, value: str, unit: str) -> str:
        if unit in ("c", "f") and spoken.startswith(self.minus_word):
            spoken = "零下" + spoken[len(self.minus_word) :]
        return super().unit(spoken, value, unit)

    def time(self, hour: int, minute: int, period: str | None) -> str:
        """For example "下午三点", "上午十点三十分", "九点零五分"."""
        prefix = ""
        if period == "am":
            prefix = "午夜" if hour == 12 else "上午"
        elif period == "pm":
            prefix = "中午" if hour == 12 else "下午" if hour <= 5 else "晚上"
        minutes = (
            ""
            if not minute
            else f"零{self.cardinal(minute)}分"
            if minute < 10
            else f"{self.cardinal(minute)}分"
        )
        return f"{prefix}{self.count(hour)}点{minutes}"

    def date(self, day: int, month: int, year: int | None) -> str:
        """For example "二零二六年九月十二日"."""
        spoken = f"{self.cardinal(month)}月{self.cardinal(day)}日"
        return f"{self.year(year)}年{spoken}" if year else spoken

    def day_of_month(self, day: int, month: int | None, year: int | None) -> str:
        return self.date(day, month, year) if month else f"{self.cardinal(day)}号"

    def shopping_day(self, n: int) -> str:
        """For example "双十一" (11.11), "双十二"; "九九" (9.9)."""
        return "双" + self.cardinal(n) if n >= 10 else super().shopping_day(n)

    def mixed(self, whole: int, numerator: int, denominator: int) -> str:
        """For example "二又二分之一"."""
        return f"{self.cardinal(whole)}又{self.fraction(numerator, denominator)}"

    def fraction(self, numerator: int, denominator: int) -> str:
        """For example "四分之三"."""
        return f"{self.cardinal(denominator)}分之{self.cardinal(numerator)}"
