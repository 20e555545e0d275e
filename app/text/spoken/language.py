"""Sentence language and, in Malay/English code-switching, the language of each number.

Written by hand: language-ID models (fastText and the like) need model files and cannot choose per
word; here script decides Tamil and Mandarin (Tamil wins a tie) and marker words decide Malay against
English (a tie, or no marker at all, is English).

The neighbour rule: up to four words on each side of an entity vote for their language with weight
1/distance; the word just before it (the word it hangs on: "pukul", "at", "bayar") counts twice, and so
does, for a bare number, the word just after it (the noun it counts: "3 kali"); a month name spelled in
only one of the languages ("Mei", "Ogos") votes 2 for it; words beyond a comma count half, a sentence
end stops the window, and the sentence's own language adds 0.5. Discourse particles (lah, ya, je) and
the pronouns "I" and "you", which Malaysians also use in Malay sentences, vote for neither. Only words
of the written text vote (the number words this normalizer writes never do).
"""

from __future__ import annotations

import re

__all__ = ["LANGUAGES", "Votes", "detect_language", "marker_counts", "script_language", "word_language"]

LANGUAGES = ("en", "ms", "zh", "ta")

_EN = frozenset(
    """
a an the are was were be been being your yours we our ours us they their them he she his her it its my
me mine this that these those and or but of to in on at for with from by about into over after before until
will would can could should shall must have has had do does did not yes please thank thanks hello hi dear
sir madam what when where which who how why there here all any some each every more less than then now today
tomorrow yesterday tonight week weeks month months year years day days hour hours minute minutes balance
account payment pay paid total due amount order number call meeting appointment date time price cost costs
delivery deliver delivered confirm confirmed send sent ready available received receive reference booked
booking scheduled kindly office branch customer service refund fee fees charge charged bill transfer
outstanding left remaining only just also again need needs want get got arrive arrives arriving expected
ends starts start open opens closes close last next new let visit check address phone contact rate interest
discount off save up down between within around approximately floor room level street road speed temperature
weather storage plan size weight distance people person guests students it's i'm you're we're don't can't
won't that's there's let's reach reached reply press dial cancel cancelled approved approve limit expires
expire valid sorry welcome team manager doctor clinic hospital flight train ticket tickets seat seats gate
departs leaves leave per year's transferred extra so very cheap expensive book table join class copies copy
share come early late already still yet because if unless while during including include includes shows show
showing weighs weigh deducted deduct admin moved changed change upgrade renew renewed insurance premium
deposit loan receipt statement public holidays holiday internet system free going coming back morning
afternoon evening night know make sure note noted is under comes won win above below points options option
delayed delay departure arrival settle claim invoice gym cash prize usually normally always never
""".split()  # noqa: SIM905
)

_MS = frozenset(
    """
saya anda awak kamu kami kita mereka dia beliau ini itu yang dan atau tetapi tapi dengan untuk kepada
daripada dari di ke pada dalam oleh bagi akan sudah telah belum masih sedang boleh tidak tak bukan ada ialah
adalah iaitu juga lagi sahaja saja hanya sila terima kasih tolong mohon harap encik puan cik tuan baki akaun
bayaran bayar jumlah harga tarikh pukul jam hari minggu bulan tahun nombor kad pengenalan alamat jalan taman
hantar dihantar tunggu sebelum selepas hingga sehingga sebanyak tinggal perlu mesti kena nak mahu hendak dah
pun kan kalau jika bila apabila kerana sebab supaya agar seperti antara setiap semua sebarang baru lama esok
semalam pagi petang malam tengah temu janji temujanji pejabat cawangan pelanggan perkhidmatan pembayaran
pesanan penghantaran tempahan rujukan anggaran kadar faedah potongan diskaun caj yuran bil pindahan bulanan
tahunan berjumlah berharga sekarang nanti kemudian segera tersebut kini kira lebih kurang memang betul dapat
diterima sampai tiba mula tamat buka tutup cuti kedai tingkat aras bilik suhu jarak berat saiz orang pelajar
tetamu peserta masa tempoh bermula berakhir hubungi telefon emel layari laman sejuk panas hujan jauh dekat
sebulan sehari setahun seorang kos naik turun tawaran promosi hadiah percuma pindah kereta rumah sewa beli
jual dibayar dibuat buat ambil bawa datang pergi balik keluar masuk hantarkan semak pastikan berikan sahkan
maklumkan kemas kerja pekerja syarikat pengurus kelas sekolah doktor klinik penerbangan tiket tempat duduk
pintu berlepas tolak jadual terlewat lewat awal cepat mungkin perlukan kat jumpa termasuk umur anak cuma
dapatkan lupa jangan tukar ni tu sana sini situ macam mana kenapa belanja guna lepas tengok potong tambah
tambahan hujung akhir lusa depan lalu sesiapa siapa apa transaksi bersabar lambat tanya pasal dokumen kali
asal biasanya selalu gaji penyata kenderaan mempunyai lorong plat pemandu memandu saman tertunggak sedia
diambil kaunter dibuka juruteknik waktu melawat talian beroperasi isnin selasa rabu khamis jumaat sabtu ahad
bekalan terganggu semula penjejakan nyatakan aduan luput permohonan dimasukkan ditutup hadir pelarasan suhu
gambar kongsi menang ikuti maklumat gangguan gunakan semasa membuat pembelian alamat baharu terletak keluasan
laju kawasan pemanggil barisan ansuran percubaan sambutan ulang aplikasi tersedia masalah dibaiki pinjaman
minit wang duit sekejap pihak kerajaan naik motosikal lori teksi mesyuarat seksyen aku engkau kau tadi jom
teruk dulu sikit banyak sangat takde tiada pastu mahal murah sedap penat rasa tahu faham beritahu makan minum
tidur cakap kata kawan abang kakak adik mak ayah bapa ibu suami isteri rakan blok tingkat tkt menara bangunan
kampung seksyen sambungan samb negeri poskod kod jln tmn lrg bandar wilayah persekutuan
""".split()  # noqa: SIM905
)

_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_VOTER = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?|[,;:]|[.!?](?=\s|$)")
_COMMAS = frozenset(",;:")
_STOPS = frozenset(".!?")
_WINDOW = 64  # characters searched on each side for the four nearest words
_TAMIL = re.compile(r"[\u0b80-\u0bff]")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")


def word_language(word: str) -> str | None:
    """The language of one lower-case word: "en", "ms" or None (a name, a neutral or unknown word)."""
    if word in _MS:
        return "ms"
    if word in _EN:
        return "en"
    if len(word) > 5 and word.endswith(("nya", "kan")):
        return "ms"
    return None


def marker_counts(text: str) -> tuple[int, int]:
    """(Malay, English) marker words in ``text``, each distinct word counted once."""
    words = set(_WORD.findall(text.lower()))
    ms, en = len(words & _MS), len(words & _EN)
    ms += sum(1 for word in words - _MS - _EN if len(word) > 5 and word.endswith(("nya", "kan")))
    return ms, en


def script_language(text: str) -> str | None:
    """The language the script shows: "ta" or "zh" (Tamil wins a tie), else None."""
    tamil, han = _TAMIL.search(text), _HAN.search(text)
    if tamil and han:
        return "ta" if len(_TAMIL.findall(text)) >= len(_HAN.findall(text)) else "zh"
    return "ta" if tamil else "zh" if han else None


def detect_language(text: str) -> str:
    """The language of ``text`` as a whole: "ta" or "zh" by script, else "ms" or "en" by marker words.

    ``normalize_spoken`` decides per sentence; this is for callers that want one answer per text.
    """
    script = script_language(text)
    if script:
        return script
    ms, en = marker_counts(text)
    return "ms" if ms > en else "en"


class Votes:
    """The neighbour rule over one Malay/English text (see the module docstring)."""

    def __init__(self, text: str, sentence_language: str) -> None:
        self.text = text
        self.sentence_language = sentence_language

    def language(self, start: int, end: int, head_after: bool = False, own: str | None = None) -> str:
        """The language of the entity at ``text[start:end]``.

        ``head_after``: a bare number, whose next word is the noun it counts ("3 kali"), so that word
        counts twice too. ``own``: a language the entity's own spelling shows (a Malay month name).
        """
        scores = {"en": 0.0, "ms": 0.0}
        scores[self.sentence_language] += 0.5
        if own in scores:
            scores[own] += 2
        before = _VOTER.findall(self.text, max(0, start - _WINDOW), start)[::-1]
        after = _VOTER.findall(self.text, end, end + _WINDOW)
        for tokens, head_counts in ((before, True), (after, head_after)):
            weight, distance = 1.0, 0
            for token in tokens:
                if token in _STOPS:
                    break
                if token in _COMMAS:
                    weight /= 2
                    continue
                distance += 1
                kind = word_language(token.lower())
                if kind:
                    scores[kind] += weight / distance * (2 if head_counts and distance == 1 else 1)
                if distance == 4:
                    break
        if scores["ms"] == scores["en"]:
            return self.sentence_language
        return "ms" if scores["ms"] > scores["en"] else "en"
