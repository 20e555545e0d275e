"""LexiconRegistry: pronunciation lexicons users registered, and which ones a request speaks with.

Lexicons are stored exactly like registered voices (``app.synthesis.registry``): in the file store
(``LEXICONS_DIR``, default ``VOICES_DIR/lexicons``) or the Redis store (``<prefix>lexicons``), chosen by
``VOICE_STORE``; each process keeps a copy checked against the store's version on every use; names are
``[A-Za-z0-9_-]{1,64}``, unique case-insensitively, at most ``MAX_LEXICONS`` of them; a lexicon records
the tenant of the key that registered it, and only that key or an admin key deletes it (403 otherwise).
Every key may list, read and use every lexicon.

Precedence (``pronouncer``): the lexicons the request names, in its order, then those attached to its
registered voice, then the server-wide one (``LEXICON_PATH``, read at startup). A lexicon a voice names
that has since been deleted is skipped (logged); one a request names that does not exist is a 400.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.core.errors import Conflict, Forbidden, InvalidRequest, NotFound, Unavailable, echo
from app.synthesis.registry import NAME_RE, OWNER_RE, RecordStore, VoiceStoreError
from app.text.lexicon import (
    Lexicon,
    LexiconEntry,
    LexiconError,
    LexiconLimits,
    Pronouncer,
    parse_entries,
    parse_pls,
)

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_CACHED_PRONOUNCERS = 64
_PLS_SUFFIXES = (".pls", ".xml")


@dataclass(frozen=True)
class RegisteredLexicon:
    """A registered lexicon: its entries, when it was made and by which tenant (None: keys were off)."""

    name: str
    lexicon: Lexicon
    created_at: int
    owner: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "version": FORMAT_VERSION,
            "name": self.name,
            "entries": [entry.to_json() for entry in self.lexicon.entries],
            "created_at": self.created_at,
            "owner": self.owner,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> RegisteredLexicon:
        """Parse and check a stored lexicon; ValueError when it is malformed."""
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown version {data.get('version')!r}")
        name, entries, created, owner = (
            data.get("name"),
            data.get("entries"),
            data.get("created_at"),
            data.get("owner"),
        )
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise ValueError(f"bad name {name!r}")
        if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
            raise ValueError("bad entries")
        if not isinstance(created, int):
            raise ValueError("bad created_at")
        if owner is not None and not (isinstance(owner, str) and OWNER_RE.fullmatch(owner)):
            raise ValueError("bad owner")
        limits = LexiconLimits(max_entries=max(1, len(entries)))
        return cls(name, parse_entries(entries, limits=limits), created, owner)


def read_lexicon_file(path: Path, limits: LexiconLimits) -> Lexicon:
    """A lexicon file: PLS for ``.pls``/``.xml``, else JSON (a list of entries, or an object with
    ``entries``, ``language`` and ``case_sensitive``). Blocking; LexiconError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() in _PLS_SUFFIXES:
            return parse_pls(text, limits=limits)
        data = json.loads(text)
        if isinstance(data, list):
            return parse_entries(data, limits=limits)
        if isinstance(data, dict) and isinstance(data.get("entries"), list):
            return parse_entries(
                data["entries"], data.get("language"), bool(data.get("case_sensitive", False)), limits
            )
        raise LexiconError("expected a list of entries or an object with 'entries'")
    except (OSError, ValueError) as exc:
        raise LexiconError(f"lexicon {path}: {exc}") from exc


def read_server_lexicon(spec: str, limits: LexiconLimits) -> Lexicon | None:
    """``LEXICON_PATH``: one file, or every ``.json``/``.pls``/``.xml`` file of a directory in name order
    (an earlier file's entries win); None when empty. Blocking; LexiconError when unusable."""
    if not spec.strip():
        return None
    path = Path(spec)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".json", *_PLS_SUFFIXES))
    else:
        files = [path]
    entries: list[LexiconEntry] = []
    for file in files:
        entries += read_lexicon_file(file, limits).entries
    if not entries:
        raise LexiconError(f"LEXICON_PATH {spec} holds no lexicon entries")
    return Lexicon(tuple(entries))


@dataclass
class LexiconRegistry:
    """Registered lexicons (at most ``max_lexicons``) in ``store``, a copy checked on every use, and the
    server-wide lexicon read from ``server_path`` at ``start``."""

    store: RecordStore[RegisteredLexicon]
    max_lexicons: int
    limits: LexiconLimits = field(default_factory=LexiconLimits)
    server_path: str = ""
    server: Lexicon | None = field(default=None, init=False)
    _version: str | None = field(default=None, init=False)
    _lexicons: dict[str, RegisteredLexicon] = field(default_factory=dict, init=False)
    _reloading: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _pronouncers: OrderedDict[tuple[object, ...], Pronouncer] = field(default_factory=OrderedDict, init=False)

    async def start(self) -> None:
        """Read the server-wide lexicon (LexiconError stops the startup) and open the store."""
        self.server = await asyncio.to_thread(read_server_lexicon, self.server_path, self.limits)
        if self.server is not None:
            log.info("server-wide lexicon: %d entries from %s", len(self.server.entries), self.server_path)
        await self.store.start()

    async def close(self) -> None:
        await self.store.close()

    async def _current(self) -> dict[str, RegisteredLexicon]:
        """The lexicons as the store holds them now (reloaded when its version moved). 503 when down."""
        try:
            if self._version is not None and await self.store.version() == self._version:
                return self._lexicons
            async with self._reloading:
                version = await self.store.version()
                if version != self._version:
                    version, loaded = await self.store.load()
                    self._version, self._lexicons = version, {lexicon.name: lexicon for lexicon in loaded}
                return self._lexicons
        except VoiceStoreError as exc:
            log.warning("lexicon store failed: %s", exc)
            raise Unavailable(
                "The lexicon registry is unavailable; try again later.", code="lexicon_store_unavailable"
            ) from exc

    async def lexicons(self) -> list[RegisteredLexicon]:
        """Registered lexicons in name order."""
        current = await self._current()
        return [current[name] for name in sorted(current)]

    async def get(self, name: str) -> RegisteredLexicon:
        """The lexicon called ``name``; NotFound when there is none."""
        found = (await self._current()).get(name)
        if found is None:
            raise NotFound(f"No lexicon called {echo(name)}.", param="name", code="lexicon_not_found")
        return found

    async def check_names(self, names: Sequence[str], param: str) -> None:
        """400 unless every one of ``names`` is a registered lexicon (a voice's, at registration)."""
        current = await self._current()
        missing = [name for name in names if name not in current]
        if missing:
            raise InvalidRequest(
                f"{param}: no lexicon called {', '.join(echo(name) for name in missing)}",
                param=param,
                code="lexicon_not_found",
            )

    async def add(self, name: str, lexicon: Lexicon, now: int, owner: str | None) -> RegisteredLexicon:
        """Store a new lexicon owned by ``owner``. 400 bad name or limit reached, 409 taken, 503 down."""
        if not NAME_RE.fullmatch(name):
            raise InvalidRequest(
                "name: use 1-64 letters, digits, '_' or '-'", param="name", code="invalid_lexicon_name"
            )
        record = RegisteredLexicon(name, lexicon, now, owner)
        try:
            result = await self.store.add(record, self.max_lexicons)
        except VoiceStoreError as exc:
            raise Unavailable("The lexicon registry is unavailable; try again later.") from exc
        if result == "exists":
            raise Conflict(
                f"name: a lexicon called {echo(name)} already exists", param="name", code="lexicon_exists"
            )
        if result == "full":
            raise InvalidRequest(
                f"At most {self.max_lexicons} lexicons can be registered; delete one first.",
                param="name",
                code="lexicon_limit_reached",
            )
        self._version = None
        return record

    async def remove(self, name: str, owner: str | None) -> None:
        """Delete a lexicon: any (``owner`` None: an admin key, or keys off) or only ``owner``'s.
        404 none by that name, 403 another key's, 503 down."""
        try:
            result = await self.store.remove(name, owner) if NAME_RE.fullmatch(name) else "absent"
        except VoiceStoreError as exc:
            raise Unavailable("The lexicon registry is unavailable; try again later.") from exc
        if result == "absent":
            raise NotFound(f"No lexicon called {echo(name)}.", param="name", code="lexicon_not_found")
        if result == "not_owner":
            raise Forbidden(
                f"The lexicon {echo(name)} was not registered with this API key: only the key that "
                "registered it, or an admin key, can delete it.",
                param="name",
                code="lexicon_not_owned",
            )
        self._version = None

    async def pronouncer(
        self, requested: Sequence[str], voice: Sequence[str] = (), param: str = "lexicons"
    ) -> Pronouncer:
        """The entries a request speaks with: ``requested`` (400 for a name that does not exist), then
        ``voice``'s (skipped when deleted since), then the server-wide lexicon."""
        if not requested and not voice and self.server is None:
            return Pronouncer(())
        current = await self._current() if requested or voice else {}
        await self.check_names(requested, param)
        chosen = list(dict.fromkeys([*requested, *voice]))
        for name in chosen:
            if name not in current:
                log.warning("a voice names the lexicon %r, which is not registered; skipped", name)
        records = [current[name] for name in chosen if name in current]
        key = (self._version, *[(record.name, record.created_at) for record in records])
        if (cached := self._pronouncers.get(key)) is not None:
            self._pronouncers.move_to_end(key)
            return cached
        lexicons = [record.lexicon for record in records] + ([self.server] if self.server else [])
        made = await asyncio.to_thread(Pronouncer, lexicons)  # compiles one pattern per entry
        self._pronouncers[key] = made
        while len(self._pronouncers) > _CACHED_PRONOUNCERS:
            self._pronouncers.popitem(last=False)
        return made
