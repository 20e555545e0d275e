"""How closely the ``spoken`` normalizer agrees with our hand-written corpus, and how fast it is.

    python -m bench.normalizer_agreement [--out NAME.json] [--reps 50] [--llm]

For every sentence of ``bench/normalizer_corpus.py`` it runs ``normalize_spoken(text)`` (language
"auto") and reports, per language and per entity type: exact agreement with the expected spoken form
(byte for byte), loose agreement (after case-folding and dropping punctuation, hyphens and extra
spaces), the digit-free rate, idempotence, and that plain sentences come back byte-identical. Speed
is the time of one call per sentence (best of 7 batches of ``--reps`` calls, taken in rounds over the
corpus; garbage collector off),
summarised as p50/p95 over the corpus, with a pure-Python reference loop to put the machine's speed
in context. ``--llm`` also scores the ``llm`` mode when ``OPENAI_BASE_URL`` and ``OPENAI_MODEL_NAME``
are set (loose agreement is the fair number there). Prints a table and writes ``bench/NORMALIZER.md``;
``--out`` also writes the JSON to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import sys
import timeit
import unicodedata
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from app.text.spoken import detect_language, normalize_spoken
from bench.normalizer_corpus import BATCHES, CORPUS, ENTITY_TYPES, LANGUAGES, Case

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"
REPORT = HERE / "NORMALIZER.md"
TARGETS = {"en": 0.95, "ms": 0.95, "zh": 0.95, "ta": 0.90, "cs": 0.90}  # the agreement targets
_SPACES = re.compile(r"\s+")
HEADER = """\
# Spoken normalizer: agreement with our corpus

Written by `python -m bench.normalizer_agreement` (the sections up to "Results" are text in that
script; the rest is measured on every run).

## Method

- **Corpus** (`bench/normalizer_corpus.py`): call-centre sentences (balances, payments, appointments,
  IC and phone confirmations, addresses, prices, dates, percentages, units, emails, URLs, order ids) in
  English, Malay, Mandarin, Tamil and Malay/English code-switching, each with its spoken form written by
  hand (never produced by running the normalizer) and the entity types it exercises. Plain sentences
  (no entity) must come back byte-identical.
- **Three batches.** The first batch (408 sentences) was written together with the conventions below,
  so its agreement mostly measures how consistently the normalizer follows them. The second batch (68
  harder sentences) was written once the normalizer existed, without running it, and scored once
  before any change: **58/68 exact (85.3%)**: en 14/18, ms 14/14, zh 13/14, ta 11/12, cs 6/10. The
  third batch (180 sentences) covers classes a Malaysian call centre sends that the first two
  lacked (signed amounts, versions, hashtags and mentions, road numbers with a slash, vehicle plates,
  Malay "hb" dates, Tamil compound numbers, Malay clock times, and ids mixed with letters, dates with
  dashes or dots, ranges, km/j and sq ft, "ke-3", decimal percentages); it was written by hand before
  any fix and scored once before one: **45/180 exact (25.0%)**: en 11/40, ms 16/57, zh 6/23, ta 7/37,
  cs 5/23 (`python -m bench.normalizer_agreement --out normalizer_unseen_issue19.json --reps 10`,
  `bench/results/normalizer_unseen_issue19.json`). The misses of each batch led to general fixes (not
  per-sentence patches), listed below; the tables count all batches as they score now. Text of a class
  nobody has looked at scores far lower than these tables (85% for the second batch, 25% for the third).
- **No expected answer was changed to match the output.** One Tamil sentence was dropped while the corpus
  was being written (its written form glued a time to a case suffix after a space, which no one writes). The
  third batch changed two conventions (Tamil tens and units joined, "pukul" before a Malay clock time); 19
  Tamil and 10 Malay or code-switched expected forms of the first two batches were rewritten to the new
  conventions when they changed, and a later one (a room's number read as on a door, "Room 305" "three oh
  five") one English form of the second. Disagreements that remain are listed at the end, with the reason
  when the expected reading is itself debatable.
- **Agreement**: exact = byte-identical; loose = after case-folding and dropping punctuation, hyphens
  and extra spaces. **Digit-free**: no Unicode decimal digit or other numeric character (Nd, No) left.
- **Speed**: one call per sentence, best of 7 batches taken in rounds over the corpus (a burst of
  load on a shared machine then costs a few sentences one batch, not one sentence all its batches),
  garbage collector off. The reference system's spoken mode took about 25-45 µs per sentence.
- The reference system measured its spoken mode against its own LLM's outputs (67% Tamil, 59%
  code-switch); that truth is different from ours, so the numbers are not directly comparable.

## Conventions (deliberate choices)

- **All languages**: IC, phone, account, OTP, PIN and reference numbers (a leading 0, 7 or more digits, or 4
  or more digits after a word such as "account", "OTP", "order", "postcode", "akaun", "验证码", "邮编",
  "எண்", "குறியீடு") are read digit by digit, without pauses for dashes or spaces. A 24-hour time from 13:00
  (and 0:xx) is said on the 12-hour clock with its part of day ("14:45" is "two forty five p m", "dua empat
  puluh lima petang", "下午两点四十五分"). Email and web addresses keep their letters and read symbols in
  English (dot, at, slash, dash, underscore; "www" is "w w w"; the scheme is dropped), digits in the
  sentence language. Codes: letter runs of up to three letters are spelled ("M H", "O R D"), longer ones
  kept (COVID); one letter run and one or two digits is a number ("A12" "A twelve"), otherwise digits one by
  one. A numeric d/m/y date is day first (with "/", "-" or "."; year first when it has four digits:
  2026-09-12, 2026/09/12); d/m without a year is a date after a date word ("on", "pada", "before", 在...) or
  when the first number is larger, otherwise a fraction. Numbers longer than 15 digits are read digit by
  digit.
- **Later classes, all languages** (found by trying sentences outside the corpus; each has entity tests): A
  whole number and a fraction is one number ("2 1/2" "two and a half", "dua setengah", 二又二分之一,
  இரண்டரை). A colon between numbers that is no clock time is minutes and seconds when two digits follow it
  ("25:30" "twenty five minutes thirty seconds"), else a ratio or score ("16:9" "sixteen to nine", "enam
  belas berbanding sembilan", 十六比九, பதினாறுக்கு ஒன்பது). A degree sign alone is degrees (darjah, 度,
  டிகிரி). A decimal over a whole number is a rating ("4.5/5" "four point five out of five", "daripada",
  五分之四点五, ஐந்துக்கு நான்கு புள்ளி ஐந்து); a unit takes a per-unit ("5mg/day" "five milligrams per
  day"); feet and inches (6'2" "six foot two", "enam kaki dua inci"). A range of weekdays ("Mon-Fri",
  "Isnin-Jumaat") is the days' names with the range word ("Monday to Friday", "Isnin hingga Jumaat",
  星期一到星期五, திங்கள் முதல் வெள்ளி), and a weekday written short before a date or a time ("Fri, 12 Dec",
  "Sat 10am"); a dash between two dates, or between a day and a date, is the range word ("1/12/2025 -
  31/12/2025", "26 Dec-2 Jan", "1-15 Dec" "the first to the fifteenth of December"); a time zone's offset
  takes the sign word ("GMT+8" "GMT plus eight"); a season or fiscal year ("2024/25") is a range of years;
  an ISO 8601 date and time ("2024-06-15T10:30:00Z") the date, the time and its zone; a phone service code
  ("*123#") its keys (star / bintang / 星号 / ஸ்டார், hash / pagar / 井号 / ஹாஷ்); "~" before a number about
  / lebih kurang / 约 / சுமார்; a comparison sign before a number is a word (≥ at least / sekurang-kurangnya
  / 不少于 / குறைந்தது, ≤, <, >, ±, ≈; Tamil keeps < and >, which it says after the number); a currency code
  after an amount is the currency ("100 MYR" "one hundred ringgit"); thousands grouped the Indian way are
  one number ("1,50,000", "₹1,00,00,000"); a number and "+" is that number and more ("18+" "eighteen plus",
  "lapan belas ke atas", 十八以上, பதினெட்டுக்கு மேல்); a dash between two amounts of one unit is the range
  word ("28°C–33°C"); letters and a decimal are spelled and read ("PM2.5" "P M two point five"); an area
  code in brackets is part of the phone number ("(03) 2161 1234"). A Tamil clock time written before மணி
  leaves the hour word to it ("9:30 மணிக்கு" "ஒன்பது முப்பது மணிக்கு"). A whole number before a fraction
  character is a mixed number ("1½" "one and a half", ஒன்றரை), and a unit after a fraction is read with it
  ("½ tsp" "one half teaspoon", "1½ kg" "one and a half kilograms"; a date is never followed by a unit: "3/2
  km"). Signs between numbers are a sum ("1+1" "one plus one", "satu tambah satu", 一加一; "2 + 2 = 4" with
  equals / sama dengan / 等于 / சமம்); a minus or a times sign only where "=" follows ("5 - 3 = 2" "five
  minus three equals two", "lima tolak tiga"), since without it they are a range or dimensions ("5-10", "30
  x 20 cm"). Short durations are units ("12 mths" "twelve months", "5 yrs", "3 wks", "mgu" minggu; "250ms"
  milliseconds; a decimal and "s" seconds, "9.58s"; a whole number and "s" is seconds too, "every 5s", "30 s
  later", except after a product's name, "iPhone 6s", and a whole number of tens, "30s", which is a decade
  unless a seconds word comes before it, "wait 30s", "tunggu 30s", 等待30s, and no era word, "popular in
  80s"; in Mandarin and Tamil, which write decades otherwise, it is seconds without one; "100s of" is
  "hundreds of"); four digits and "hrs" are a 24-hour clock time when they start with 0 ("0930 hrs" "nine
  thirty") or follow a clock word ("at 1700hrs"), else a duration ("1500 hrs of training"); a picture's
  resolution is its lines and p ("1080p" "ten eighty p", 一零八零P) and "4K" before a screen word (TV, UHD,
  video...) "four K"; three and four digits joined by a dash after a phone word ("call 555-1234") are a
  phone number. A tilde between numbers is a range like a dash ("22~30℃" 摄氏二十二到三十度); a dash before
  a number with a leading zero, or after a long number and before a smaller one, is no range ("Suite 3-05"
  "three zero five", "20250115-0042" digit by digit); pounds, ounces and miles per hour ("2.5lbs", "12 oz",
  "15mph"); the rupee written in Tamil ("ரூ.10,000" பத்தாயிரம் ரூபாய்); 版本号 is a version word. A keypad
  code of stars, hashes and digits ending in a hash is its keys ("*#06#" "star hash zero six hash"); a lone
  "#" or "*" near a keypad word (press, tekan, dial, 按, அழுத்த) is the key's name ("then # to confirm"
  "then hash to confirm", 井号键), elsewhere it stays; ratios of three numbers ("1:3:5" "one to three to
  five"); a decimal with M, B or bn is millions or billions ("3.4M" "three point four million"; "5M" stays);
  a year alone in brackets is a year ("(2023)" "twenty twenty three"); "Approx.", "Incl.", "Excl." at a
  sentence's start. Crore and lakh after an amount are scale words in English and Tamil ("₹2.5 crore" "two
  point five crore rupees", இரண்டு புள்ளி ஐந்து கோடி ரூபாய்) and multiplied out in Malay and Mandarin; a day
  and a month, a dash and another date are a date range ("24/2 - 27/3/2025", "24/2-27/3"); two dotted clock
  times joined by a dash before a part of the day or am/pm are a range of times ("8.00-10.00 pg" "pukul
  lapan hingga sepuluh pagi", "9.00-5.00 pm" "nine o'clock to five p m"). Hours and minutes written short
  ("2h 15m" "two hours fifteen minutes"), feet and inches in letters ("6 ft 2 in" "six foot two"), "50-50"
  "fifty fifty", and a count before an amount ("3 x RM33.30" "three times"). A sale day named by its date is
  the number twice ("11.11" "eleven eleven", 双十一; "10.10", "12.12" always, "9.9" and the like only before
  a sale word), and a whole number over 5, 10 or 100 after a score word is a score ("score: 8/10" "eight out
  of ten"; "3/10 of the budget" stays a fraction). A body-mass index's unit ("22.5 kg/m²") is kilograms per
  square metre. A hash before up to four capitals and four digits or more is an order number in every
  language ("#A1234"), not a hashtag ("#GE15", "#CNY2026" with a year, stay hashtags). A currency's own name
  written after an amount with its sign is said once ("RM50 ringgit", "$5 dollars", "¥1,299.99元", "¥50块"
  五十元; a capitalised name such as "Dollar Tree" or a Tamil word with a case suffix stays), and so is "~"
  after a word that already says about ("about ~8", "lebih kurang ~RM8", 大约~8). A growth rate after a
  percentage is read in English and Malay ("5% y/y" "five percent year on year", "tahun ke tahun"; q/q, m/m,
  YoY, QoQ, MoM; "the MoM" alone is a meeting's minutes). A letter grade or blood group with its sign ("A+"
  "A plus", A加, "9A+" "nine A plus"; "O+" "O positive", "positif", O阳性, "O பாசிட்டிவ்"): O and AB, and
  any letter after a blood word in the sentence (blood, darah, donor, 血, இரத்த), are blood groups; a minus
  sign is read only after a count, for a blood group, after a grade word ("scored B-") or after another
  grade in the sentence ("Math A+, Science B-"), so "Section A- Overview" stays. An address's unit number of
  a block letter, a floor and a unit is its parts, each number read whole ("B-3-12" "B three twelve", spaced
  in Mandarin: "B 三 十二"; a leading zero digit by digit), and two ordinals joined by a dash are a range
  ("3rd-4th" "third to fourth"). Two numbers and a colon after a ratio word are a ratio even where they
  could be a clock time ("scale 1:50" "one to fifty", "nisbah", 比例, விகிதம்); the "/-" after an amount
  ("Rs. 1,500/-") is not read; a spaced "@" before a time or an amount is "at" / "pada" ("call me @ 5pm",
  "12 @ RM2.50"; Mandarin and Tamil keep it, and so does "Ahmad @ Ali", a name's alias); "w/" and "w/o"
  before a space are "with" / "without" ("dengan" / "tanpa"); "j" after an amount is juta ("RM5.6j"). A
  count, "x" and a capitalised item is a receipt's line ("2 x Teh Tarik" "two Teh Tarik"); two two-digit
  numbers over a slash after an expiry word are a card's month and year ("exp 08/27" "zero eight twenty
  seven", "luput", 有效期, காலாவதி); two numbers of up to two digits joined by a dash after a score word are
  a score, read as a ratio ("menang 3-2" "tiga berbanding dua", 比分3-2 三比二; "won 2-0" "two to zero"; not
  before "kali" / "times"). A financial year glued to "FY" or "CY" is a year ("FY2025" "F Y twenty twenty
  five"); "mi" after a number is miles (batu, 英里, மைல்). The Mandarin scales 万, 千万 and 亿 after an
  amount are scale words in Mandarin ("RM1.2亿" 一点二亿令吉) and multiplied out in the other languages
  ("one hundred twenty million ringgit"); trillions are a scale word ("RM1.2tn" "one point two trillion
  ringgit", trilion, 万亿, டிரில்லியன்), and a whole amount before a scale word is counted (两亿, ஒரு
  டிரில்லியன்). "&" between spaced words is and / dan / 和 / மற்றும் ("salt & pepper"), and between capitals
  in English and Malay ("R&D" "R and D"); "kcal" is kilocalories; an amount, "x" and a count is an
  instalment ("RM921.08 x 60 bulan" "... darab enam puluh bulan", "times", 乘); two multiples of five over a
  slash that make 100 are a split ("60/40" "sixty forty", 六十比四十), and "20/20" is "twenty twenty"; four
  dotted numbers of up to 255 are an IP address, each part digit by digit ("192.168.1.1" "one nine two dot
  one six eight dot one dot one", "titik", 点; a version after a version word); four to six digits after
  "text ... to", "SMS ... ke" (no digit between) are a short code, digit by digit; "sen" glued to a number
  is the coin ("50sen", 五十仙), and "tgh hari" after a clock time is tengah hari once. A lowercase word of
  three letters or more, a dash and a number keep the word ("top-10" "top ten", "mid-2025" "mid twenty
  twenty five"; it was spelled "T O P"); two codes of one letter run joined by a dash are a range ("Q1-Q3"
  "Q one to Q three"); "+" after a number with k or M is "or more" ("10k+" "ten thousand plus", "1M+" "one
  million plus"). A count after an item, "x" glued to it, is said with the times word ("Teh Tarik x2" "Teh
  Tarik times two", "darab dua", 拉茶x2 拉茶乘二; "Galaxy X2" and "x200" stay codes). "©" is copyright / hak
  cipta / 版权 / பதிப்புரிமை and the years after it are years ("© 2020-2025"; after the word itself only the
  years). Malaysian address words before a name (Bkt, Sg, Bdr, Tg, Lbh, Psn, Kws: Bukit, Sungai, Bandar,
  Tanjung, Lebuh, Persiaran, Kawasan) and a road's type after its name ("Old Klang Rd." Road, Ave, Blvd,
  Hwy) are expanded in English and Malay; "St." is Street after a capitalised word that does not start its
  sentence and Saint before a capitalised name elsewhere ("Main St." / "St. Mary's"), else it stays. Two
  months joined by a dash are a range ("Jan-Mar" "January to March", "Januari hingga Mac", 一月到三月, ஜனவரி
  முதல் மார்ச்; "Mei-Mei", a name, stays), and a short month before a year is its name ("Sept 2024"
  "September twenty twenty four"). A short weekday before a day and a month makes them a date ("Tue 3/12"
  "Tuesday the third of December", "Selasa tiga Disember", 周二 十二月三日, spaced where two Chinese numbers
  would run together). A room's number of three or four digits after room, suite, bilik, kamar, 房间, அறை
  (or before 室) is said as on a door: in English its hundreds and then the rest as a clock's minutes ("Room
  1205" "twelve oh five", "Suite 305" "three oh five"), in the other languages digit by digit. "J" and
  "Juta" after an amount are juta ("RM1.2J"). "min", "max" and "maks" before an amount or a number are
  minimum / maximum ("min. RM10" "minimum ten ringgit", "maksimum"); after a number "min" stays minutes.
  Three or more groups of digits joined by dashes, eight digits or more in all, are an account or card
  number, digit by digit without the dashes ("1234-5678-9012"; 账号 一二三四五六七八九零一二, where the
  later groups were read as thousands; "10-20-30" stays). A Mandarin extension after a phone number (转
  right after its digits, or 分机) is dialled digit by digit ("1234转123" 转一二三). "pct" after a number is
  percent; "++" after an amount (a price before service charge and tax, "RM88++") is "plus plus" in English
  and Malay. A spaced "+" or "=" between a word, a number or a percentage and an amount or a number is a sum
  ("$1,299.99 + 6% SST = $1,377.99" "... plus six percent SST equals ..."; "a + b = c" and "Tap + to add"
  stay). An HTTP status of three digits after error, HTTP, status (code) or ralat is read as a room number
  is ("Error 404" "four oh four", "HTTP 500" "five hundred"; digit by digit in the other languages). A
  proper fraction before 的 is a share even after a date word (在2/3的地区 三分之二的; 在12/10的会议上 stays
  a date).
- **Third-batch classes, all languages**: a sign before an amount or a number ("-RM12.90", "RM-12.90", "RM
  -12.90", "-RM 12.90", "+RM35", "-3", "+2.5%"; the minus sign U+2212 too) is a word before it: minus /
  negatif / 负 / மைனஸ், and plus / tambah / 加 / பிளஸ். A version ("v4.3", "V2.5.1" with a dot, "v5"; or a
  dotted number after version, versi, firmware, iOS, 版本, பதிப்பு) is the version word (version, versi,
  版本, பதிப்பு) and each part whole, joined by point / titik / 点 / புள்ளி ("v1.12.7" "version one point
  twelve point seven"); no second version word when one is written next to it. A hashtag is "hashtag" and a
  mention "at" in every language (as symbols in an email), then the words split at capitals and digits
  ("#PromoDeepavali2025" "hashtag Promo Deepavali twenty twenty five", "@TNBCareline" "at T N B Careline"),
  capital runs of up to three letters spelled, a year in the language's year form, up to three digits as a
  number; "#" before an id (after order, ticket, ref...; or with five digits or a hyphen) is "number". After
  a road word (Jalan, Jln, Lorong, Persiaran, Lebuh, Seksyen, Road...), with up to two names or codes
  between, "7/2" is a road number: each number whole, the slash spoken (slash / garis miring / 斜杠 /
  ஸ்லாஷ்), letters spelled ("Jalan SS2/24" "Jalan S S two slash twenty four"), in the sentence's language. A
  vehicle plate (one to three capitals with no I or O, a space, one to four digits: "JQA 3391", "VBN 802")
  is spelled and read digit by digit; not after OTP, TAC, SPM and similar codes, and not a year (19xx,
  20xx).
- **Reference numbers** mixed with letters and slashes ("EP123456789MY", "INV/2025/00123") are read
  as codes: letters spelled, digits one by one, separators silent.
- **English**: no "and", commas or hyphens in numbers ("one thousand two hundred fifty", "twenty
  one"); British unit spellings (kilometre, litre); plural for every value but exactly 1; money
  "ringgit"/"sen" never plural; dates "the twelfth of September twenty twenty six"; years after
  "in/since/by/from..." (or a month, or Q1-Q4, or a year so read and "to/and/or..." before it: "from 2010
  to 2020"; a range of years after such a word: "since 1995-97") as years ("nineteen ninety eight", "two
  thousand five"), otherwise as numbers; "3pm" "three p m", "9:05" "nine oh five", "10:00" "ten
  o'clock"; a dotted time after at, before, after, until or till is a clock time ("at 12.30" "at twelve
  thirty"; not before %, a unit, times or per); "percent".
- **Malay**: zero "kosong"; se- for ten, a hundred and a thousand ("sepuluh", "seratus", "seribu") but "satu
  juta"; "perpuluhan" for the decimal point; "ke-" ordinals with "pertama" for 1; dates "dua belas September
  dua ribu dua puluh enam" (years as numbers); times "tiga petang" with pagi (a.m.), tengah hari (12 and 1
  p.m.), petang (2-6 p.m.), malam (7-11 p.m.), tengah malam (12 a.m.); per-units with se- ("sekilogram",
  "sebulan", "kilometer sejam"); "setengah", "suku", "tiga suku", else "dua per tiga"; "hingga" for ranges;
  "negatif" for minus; address abbreviations in full (Tkt Tingkat, Sek. Seksyen, Kpg Kampung, Bgn. Bangunan,
  W.P. Wilayah Persekutuan, samb. sambungan). A clock time ("10am", "14:00", "8.30 pagi", "2 petang", "9
  malam" after pada/sebelum/dari...) takes "pukul" before it unless "pukul" or "jam" is the word before it
  or the sentence already has "pukul" or a clock time before it: "10am hingga 6pm" is "pukul sepuluh pagi
  hingga enam petang". The parts of the day written short after a clock time are said in full ("10:30pg"
  "pukul sepuluh tiga puluh pagi", "2.30 ptg", "8.00 mlm", "12tgh" tengah hari, "tgh mlm" tengah malam; in
  another language a.m. or p.m.); "mlm" after a bare number counts nights ("3 hari 2 mlm" "tiga hari dua
  malam") unless a dash after a clock time makes it one ("10pg-10mlm"). "3hb Ogos" (hari bulan) is "tiga
  hari bulan Ogos", "1hb" alone "satu hari bulan", "10hb-12hb Mac" a range; "hb" in a code-switched sentence
  is read in Malay, in an English, Mandarin or Tamil sentence it is a date ("the third of August", 八月三日).
- **Mandarin**: 万/亿 grouping with 零; 十 not 一十 at the start; 两 for a leading 2 before 百/千/万/亿
  and for a bare 2 before a measure word (两点, 两个, 两公斤, 两令吉), 二 after 第; scales multiplied out
  (RM2.5 million 两百五十万令吉); dates 二零二六年九月十二日 (years digit by digit); times 上午/中午/下午
  /晚上/午夜 + 点/分; ¥ and ￥ are 元 (renminbi; yen in the other languages); a dash after 日/号/月/年
  before a number is 到 (12月1日-12月31日), a range of years before 年 is read digit by digit
  (二零二五到二零二六年度); 百分之; units before the number where Mandarin puts them (摄氏三十度,
  每小时六十公里, 每公斤五令吉); GB/MB kept as letters; Latin titles (Dr.) kept as written.
- **Tamil** (number words written by hand): Indian grouping (ஆயிரம், லட்சம், கோடி) with joining forms as
  separate words ("ஆயிரத்து இருநூற்று ஐம்பது"), except that a tens word and a unit that starts with a
  vowel are one word, as Tamil writes them (முப்பத்தேழு, இருபத்தொன்று, நாற்பத்தைந்து, தொண்ணூற்றொன்பது,
  இருபத்தோராயிரம்; இருபத்து மூன்று and முப்பத்து நான்கு stay two words); thousands merge with their
  multiplier (இரண்டாயிரம், மூவாயிரம், ஐயாயிரம், பதினோராயிரம்); a final ஒன்று is ஒரு before a currency, unit
  or counted noun ("இருபத்தொரு வயது", "பதினொரு நாட்கள்"); zero பூஜ்ஜியம்; decimals after புள்ளி;
  explicit million/billion stay words (மில்லியன்); dates in written order "பன்னிரண்டு செப்டம்பர்
  இரண்டாயிரத்து இருபத்தாறு"; times காலை /
  மதியம் (12-3 p.m.) / மாலை (4-6) / இரவு (7-11) + "மணி" + "நிமிடம்"; "முதல்" for ranges; case suffixes
  glued to digits, or after a hyphen, are joined with sandhi (5க்கு ஐந்துக்கு, 2020இல் இரண்டாயிரத்து இருபதில்,
  RM200க்கு இருநூறு ரிங்கிட்டுக்கு, 2023-ல் இரண்டாயிரத்து இருபத்து மூன்றில், ல் being இல்); Tamil unit abbreviations
  (கி.மீ., மீ, செ.மீ., கி.கி) in full; a dotted time before மணி is a time ("7.30 மணிக்கு" "ஏழு முப்பது
  மணிக்கு"); Latin titles kept as written.
- **Code-switching** (Malay/English): each number takes the language of its neighbours: up to four
  words each side, weight 1/distance; the word it hangs on (just before it) counts twice, and so does
  the noun after a bare number ("3 kali"); a month spelled one way ("Mei", "May") votes 2; a comma
  halves, a sentence end stops; the sentence's majority adds 0.5. "I", "you" and particles (lah, ya,
  je) vote for neither. "ke-3" and "3hb" are Malay whatever their neighbours say; a road number takes
  the sentence's language (the road word is a name, not a vote). An explicit `language` turns this
  off: every entity is read in that language.
- **Language per sentence**: script decides Tamil and Mandarin (Tamil wins a tie), marker words decide
  Malay against English (a tie is English); a text with several sentences decides each one.

## Fixes made after the second batch's first run

A year after a quarter code ("Q3 2025"); dimensions ("30 x 20 x 10 cm": by, darab, 乘, பெருக்கல்);
short numbers after phone words read digit by digit ("Dial 999", "拨打999"); "p.a."; Tamil sandhi for
a suffix glued to a word that ends in a consonant (ரிங்கிட்டுக்கு); the counted-noun rule and the month
vote in code-switching; three missing marker words (asal, kali, usually).

## Fixes made after the third batch's first run

The eight classes above as families (signs on money, numbers, percentages and units; versions after v or
a version word; hashtags, mentions and # ids; road numbers after a road word; plates; hb dates and
ranges; Tamil joined compounds in cardinals, ordinals, counts and thousands; pukul before Malay clock
times, bare hours before pagi/petang, and time ranges across pagi/petang); a dd-mm-yyyy date is tried
before a phone number; a money range with a scale says the currency once ("RM1.5k-RM2k"); year-first
dates with slashes or dots; references with slashes; a sentence does not end after a Latin word glued
to Chinese ("地址：No. 5"); about 60 more Malay marker words (kenderaan, mempunyai, lorong, mesyuarat...).

## Known limits

- Code-switch readings are a heuristic; some sentences have no single right answer ("kat Gate 5":
  lima or five?).
- Not handled: Roman numerals, arithmetic ("RM10 + RM5" is read as a signed amount), sports scores
  ("3-1" is read as a range), a number glued to a vulgar fraction ("2½"), Tamil sandhi beyond the
  common suffixes and the tens-and-units compounds (hundreds stay apart: நூற்று ஐம்பது).
- Plates are found by shape: a glued plate ("JQA3391") is read as a code (the same digits one by one),
  a one-letter plate ("W 1234 H") is not recognised, and three capitals before a number that are not a
  plate and not in the exclusion list ("BMW 320") are read as one. Mandarin "1" in plates is 一, not 幺.
- Malay and English share no marker word, but loanwords used in both (promo, unit, data) are neutral
  on purpose; a sentence of loanwords only is read as English.

"""


def has_digit(text: str) -> bool:
    """Any decimal digit or other numeric character (Unicode Nd or No) left in ``text``."""
    return any(unicodedata.category(c) in ("Nd", "No") for c in text)


def loose(text: str) -> str:
    """Case-folded, punctuation and hyphens dropped, whitespace collapsed."""
    kept = "".join(
        " " if c == "-" else c for c in text.casefold() if not unicodedata.category(c).startswith("P")
    )
    return _SPACES.sub(" ", kept).strip()


def time_calls(function: Callable[[str], str], texts: list[str], reps: int, rounds: int = 7) -> list[float]:
    """Microseconds per call for each text: the best of ``rounds`` batches of ``reps`` calls.

    The rounds go over the whole corpus in turn, so that a burst of load on a shared machine costs one
    batch of a few sentences, not all batches of one. timeit turns the garbage collector off.
    """
    best = [float("inf")] * len(texts)
    for _ in range(rounds):
        for index, text in enumerate(texts):
            seconds = timeit.Timer(lambda text=text: function(text)).timeit(number=reps)
            best[index] = min(best[index], seconds / reps * 1e6)
    return best


def reference_loop_us() -> float:
    """A fixed pure-Python workload (sum(range(1000))) in µs, to compare machines."""
    return min(timeit.Timer("sum(range(1000))").repeat(repeat=5, number=2000)) / 2000 * 1e6


def _rate(hits: int, total: int) -> float:
    return hits / total if total else 0.0


def score(outputs: list[str], cases: list[Case]) -> dict[str, object]:
    """Agreement and invariants of ``outputs`` against ``cases``, overall, per language and per entity."""
    rows = []
    for case, out in zip(cases, outputs, strict=True):
        rows.append(
            {
                "case": case,
                "out": out,
                "exact": out == case.expected,
                "loose": loose(out) == loose(case.expected),
                "digit_free": not has_digit(out),
            }
        )

    def summary(selected: list[dict[str, object]]) -> dict[str, float | int]:
        return {
            "n": len(selected),
            "exact": _rate(sum(bool(r["exact"]) for r in selected), len(selected)),
            "loose": _rate(sum(bool(r["loose"]) for r in selected), len(selected)),
            "digit_free": _rate(sum(bool(r["digit_free"]) for r in selected), len(selected)),
        }

    by_language = {lang: summary([r for r in rows if r["case"].language == lang]) for lang in LANGUAGES}
    by_entity = {kind: summary([r for r in rows if kind in r["case"].entities]) for kind in ENTITY_TYPES}
    disagreements = [
        {
            "language": r["case"].language,
            "text": r["case"].text,
            "expected": r["case"].expected,
            "got": r["out"],
        }
        for r in rows
        if not r["exact"]
    ]
    by_batch = {
        batch: {
            "all": summary([r for r in rows if r["case"].batch == batch]),
            "by_language": {
                lang: summary([r for r in rows if (r["case"].batch, r["case"].language) == (batch, lang)])
                for lang in LANGUAGES
            },
        }
        for batch in BATCHES
    }
    return {
        "all": summary(rows),
        "by_language": by_language,
        "by_entity": by_entity,
        "by_batch": by_batch,
        "disagreements": disagreements,
    }


def run_spoken(reps: int) -> dict[str, object]:
    """Scores, invariants, language detection and speed of ``normalize_spoken`` on the corpus."""
    outputs = [normalize_spoken(case.text) for case in CORPUS]
    result = score(outputs, CORPUS)
    plain = [c for c in CORPUS if "plain" in c.entities]
    result["plain_unchanged"] = _rate(sum(normalize_spoken(c.text) == c.text for c in plain), len(plain))
    result["idempotent"] = _rate(sum(normalize_spoken(out) == out for out in outputs), len(outputs))
    detected = defaultdict(list)
    for case in CORPUS:
        if case.language != "cs":
            detected[case.language].append(detect_language(case.text) == case.language)
    result["detection"] = {lang: _rate(sum(hits), len(hits)) for lang, hits in detected.items()}
    times = time_calls(normalize_spoken, [case.text for case in CORPUS], reps)
    ordered = sorted(times)
    result["speed_us"] = {
        "p50": statistics.median(times),
        "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
        "mean": statistics.fmean(times),
        "max": ordered[-1],
        "reference_loop_us": reference_loop_us(),
    }
    return result


def run_llm() -> dict[str, object] | None:
    """Scores of the ``llm`` mode, or None when no model is configured in the environment."""
    base_url, model = os.environ.get("OPENAI_BASE_URL", ""), os.environ.get("OPENAI_MODEL_NAME", "")
    if not (base_url and model):
        return None
    from app.text.llm import LLMNormalizer  # only when asked: it needs a reachable model

    async def all_outputs() -> list[str]:
        client = LLMNormalizer(
            base_url,
            os.environ.get("OPENAI_API_KEY", ""),
            model,
            float(os.environ.get("OPENAI_TIMEOUT", "30")),
        )
        await client.start()
        try:
            return [await client.normalize(case.text) for case in CORPUS]
        finally:
            await client.close()

    return score(asyncio.run(all_outputs()), CORPUS)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def table(result: dict[str, object]) -> str:
    """The per-language table (Markdown)."""
    by_language: dict[str, dict[str, float]] = result["by_language"]
    lines = [
        "| Language | Sentences | Exact | Loose | Digit-free | Target (exact) |",
        "|---|---|---|---|---|---|",
    ]
    for lang in LANGUAGES:
        row = by_language[lang]
        met = "met" if row["exact"] >= TARGETS[lang] else "MISSED"
        rates = " | ".join(_pct(row[key]) for key in ("exact", "loose", "digit_free"))
        lines.append(f"| {lang} | {row['n']} | {rates} | {_pct(TARGETS[lang])} {met} |")
    total: dict[str, float] = result["all"]
    rates = " | ".join(_pct(total[key]) for key in ("exact", "loose", "digit_free"))
    lines.append(f"| **all** | {total['n']} | {rates} | |")
    return "\n".join(lines)


def batch_table(result: dict[str, object]) -> str:
    """Exact agreement of each batch, per language (Markdown): "n/total" and the rate."""
    by_batch: dict[str, dict[str, dict]] = result["by_batch"]
    lines = ["| Batch | " + " | ".join(LANGUAGES) + " | all |", "|---|" + "---|" * (len(LANGUAGES) + 1)]
    for batch in BATCHES:
        cells = []
        for row in [*(by_batch[batch]["by_language"][lang] for lang in LANGUAGES), by_batch[batch]["all"]]:
            hits = round(row["exact"] * row["n"])
            cells.append(f"{hits}/{row['n']} ({_pct(row['exact'])})" if row["n"] else "-")
        lines.append(f"| {batch} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def entity_table(result: dict[str, object]) -> str:
    """Exact agreement per entity type (Markdown)."""
    by_entity: dict[str, dict[str, float]] = result["by_entity"]
    lines = ["| Entity | Sentences | Exact | Loose |", "|---|---|---|---|"]
    for kind in ENTITY_TYPES:
        row = by_entity[kind]
        if row["n"]:
            lines.append(f"| {kind} | {row['n']} | {_pct(row['exact'])} | {_pct(row['loose'])} |")
    return "\n".join(lines)


def coverage_matrix() -> str:
    """How many corpus sentences exercise each entity type in each language (Markdown)."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for case in CORPUS:
        for kind in case.entities:
            counts[kind, case.language] += 1
    lines = ["| Entity | " + " | ".join(LANGUAGES) + " |", "|---|" + "---|" * len(LANGUAGES)]
    for kind in ENTITY_TYPES:
        lines.append(f"| {kind} | " + " | ".join(str(counts[kind, lang] or "-") for lang in LANGUAGES) + " |")
    return "\n".join(lines)


# why a listed disagreement is not simply a bug: the expected reading itself is debatable
DEBATABLE = {
    "Saya tunggu kat Gate 5, flight boarding pukul 7:15.": (
        "an English label in a Malay sentence: many speakers would say 'Gate five', which is what the "
        "neighbour rule picks from 'Gate'; kept as written rather than changed to match"
    ),
    "Office kami dah pindah to Jalan PJU 1A/3, opposite the mall.": (
        "four Malay and four English marker words: a tie, which the detection rule makes English, and a "
        "road number takes the sentence's language; a speaker could go either way, kept as written"
    ),
}


def disagreement_list(result: dict[str, object]) -> str:
    found: list[dict[str, str]] = result["disagreements"]
    if not found:
        return "None: every sentence agrees exactly."
    lines = []
    for d in found:
        lines.append(f"- [{d['language']}] `{d['text']}`\n  - expected: {d['expected']}\n  - got: {d['got']}")
        if d["text"] in DEBATABLE:
            lines.append(f"  - note: {DEBATABLE[d['text']]}")
    return "\n".join(lines)


def report(spoken: dict[str, object], llm: dict[str, object] | None, header: str) -> str:
    """The whole ``bench/NORMALIZER.md``: the hand-written ``header`` and the measured numbers."""
    speed: dict[str, float] = spoken["speed_us"]
    detection: dict[str, float] = spoken["detection"]
    parts = [
        header.rstrip(),
        "## Results (spoken mode, language auto)\n",
        f"Measured with `python -m bench.normalizer_agreement` on {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}.\n",
        table(spoken),
        "",
        f"Plain sentences unchanged: {_pct(spoken['plain_unchanged'])} (byte-identical). "
        f"Idempotent: {_pct(spoken['idempotent'])} of outputs. "
        "Language detection (sentences of one language): "
        + ", ".join(f"{lang} {_pct(v)}" for lang, v in detection.items())
        + ".\n",
        "### Per batch (exact)\n",
        batch_table(spoken),
        "",
        "### Speed\n",
        f"Per sentence: p50 {speed['p50']:.1f} µs, p95 {speed['p95']:.1f} µs, mean {speed['mean']:.1f} µs, "
        f"max {speed['max']:.1f} µs. Reference loop `sum(range(1000))`: "
        f"{speed['reference_loop_us']:.1f} µs on this machine (a current desktop or server core takes "
        "about 8-10 µs; scale the numbers above by that ratio to compare).\n",
        "### Agreement per entity type\n",
        entity_table(spoken),
        "",
        "### Coverage matrix (sentences per entity type and language)\n",
        coverage_matrix(),
        "",
    ]
    if llm is not None:
        parts += ["## llm mode\n", table(llm), ""]
    parts += ["## Disagreements\n", disagreement_list(spoken), ""]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", help="also write the JSON to bench/results/NAME")
    parser.add_argument("--reps", type=int, default=30, help="calls per timing batch")
    parser.add_argument("--llm", action="store_true", help="also score the llm mode when configured")
    args = parser.parse_args(argv)
    spoken = run_spoken(args.reps)
    llm = run_llm() if args.llm else None
    REPORT.write_text(report(spoken, llm, HEADER), encoding="utf-8")
    print(table(spoken))
    print("\nper batch (exact):\n" + batch_table(spoken))
    speed: dict[str, float] = spoken["speed_us"]
    print(
        f"\nspeed: p50 {speed['p50']:.1f} µs, p95 {speed['p95']:.1f} µs per sentence "
        f"(reference loop {speed['reference_loop_us']:.1f} µs)"
    )
    print(f"plain unchanged {_pct(spoken['plain_unchanged'])}, idempotent {_pct(spoken['idempotent'])}")
    print(f"{len(spoken['disagreements'])} disagreements, listed in {REPORT.relative_to(HERE.parent)}")
    if llm is not None:
        print("\nllm mode:\n" + table(llm))
    payload = {
        "spoken": spoken,
        "llm": llm,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    if args.out:
        RESULTS_DIR.mkdir(exist_ok=True)
        (RESULTS_DIR / args.out).write_text(
            json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
