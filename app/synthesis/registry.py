"""VoiceRegistry: voices users registered from a reference clip, kept as speech codes + transcript.

The voices live in a ``VoiceStore`` (``app/synthesis/voice_stores/``, built by its ``factory``): files
in ``VOICES_DIR`` shared by the workers of one host, or Redis shared by every replica. Each process
keeps a copy and checks the store's version on every use (one small read: a Redis GET, or a file read
in a worker thread), reloading the copy when another process changed it. So a voice registered or
deleted anywhere is seen by the next request everywhere, with no notification channel that could drop
a message while a connection is down. Uniqueness (case-insensitive) and the voice limit are enforced
by the store in one atomic step (a Lua script, or a host-wide file lock).

Names are restricted to ``[A-Za-z0-9_-]{1,64}`` (safe as file names everywhere) and may not shadow a
built-in voice or alias. A voice's codes are kept per model family (``{"neucodec": [...], "moss": [...]}``,
flat and frame-major as each family's ``encode_reference`` returns them); its transcript may be empty
when it was registered only for families that need none. A store
that cannot be reached is a 503 (``Unavailable``) for whatever needs a registered voice; built-in
voices never consult the registry.

Ownership: a voice registered with an API key records its owner, the key's tenant (a fingerprint of
the key, never the key: ``app.api.auth.tenant_of``). Every key may use every voice; ``remove`` with an
``owner`` deletes only a voice recorded with that owner (the route passes none for an admin key, or
when keys are off), decided by the store in the same atomic step as the delete. A voice with no owner
recorded (registered while keys were off, or before owners were recorded) is then deletable only
without an owner: by an admin key.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from app.core.constants import CODE_VALUES
from app.core.errors import APIError, Conflict, Forbidden, InvalidRequest, NotFound, Unavailable, echo

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")  # matched whole (fullmatch)
OWNER_RE = re.compile(r"[0-9a-f]{1,64}")  # a key's fingerprint (hex)
FORMAT_VERSION = 2
LEGACY_FAMILY = "neucodec"  # version 1 records hold one list of codes: NeuCodec's (the only family then)

AddResult = Literal["added", "exists", "full"]
RemoveResult = Literal["removed", "absent", "not_owner"]


@dataclass(frozen=True)
class RegisteredVoice:
    """A registered voice: its transcript (normalized, as the LM sees it; "" when none was given) and the
    clip's speech codes per model family (``codes[family_name]``)."""

    name: str
    reference_text: str
    codes: Mapping[str, tuple[int, ...]]
    created_at: int
    consent: str | None = None
    owner: str | None = None  # the tenant (key fingerprint) that registered it; None: keys were off
    duration_s: float | None = None
    """The clip's length; None in records written before it was kept."""
    lexicons: tuple[str, ...] = ()
    """The pronunciation lexicons attached to the voice, by name (after a request's own)."""

    @property
    def n_codes(self) -> int:
        """Codes of the family the voice was registered with (the first one stored)."""
        return len(next(iter(self.codes.values()), ()))

    def to_json(self) -> dict[str, object]:
        return {
            "version": FORMAT_VERSION,
            "name": self.name,
            "reference_text": self.reference_text,
            "codes": {family: list(codes) for family, codes in self.codes.items()},
            "created_at": self.created_at,
            "consent": self.consent,
            "owner": self.owner,
            "duration_s": self.duration_s,
            "lexicons": list(self.lexicons),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> RegisteredVoice:
        """Parse and check a stored voice (format 1 or 2); raises ValueError when it is malformed."""
        version = data.get("version")
        if version not in (1, FORMAT_VERSION):
            raise ValueError(f"unknown version {version!r}")
        name, text, codes = data.get("name"), data.get("reference_text"), data.get("codes")
        created, consent, owner = data.get("created_at"), data.get("consent"), data.get("owner")
        duration, lexicons = data.get("duration_s"), data.get("lexicons", [])
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise ValueError(f"bad name {name!r}")
        if not isinstance(text, str):
            raise ValueError("missing reference_text")
        by_family = {LEGACY_FAMILY: codes} if version == 1 else codes
        if not isinstance(by_family, dict) or not by_family:
            raise ValueError("missing codes")
        for family, family_codes in by_family.items():
            if not isinstance(family_codes, list) or not family_codes:
                raise ValueError(f"missing codes for {family!r}")
            if not all(isinstance(c, int) and 0 <= c < CODE_VALUES for c in family_codes):
                raise ValueError("codes out of range")
        if not isinstance(created, int) or (consent is not None and not isinstance(consent, str)):
            raise ValueError("bad created_at or consent")
        if owner is not None and not (isinstance(owner, str) and OWNER_RE.fullmatch(owner)):
            raise ValueError("bad owner")
        if duration is not None and (not isinstance(duration, int | float) or duration < 0):
            raise ValueError("bad duration_s")
        if not isinstance(lexicons, list) or not all(
            isinstance(n, str) and NAME_RE.fullmatch(n) for n in lexicons
        ):
            raise ValueError("bad lexicons")
        codes_by_family = {str(f): tuple(c) for f, c in by_family.items()}
        seconds = None if duration is None else float(duration)
        return cls(
            name,
            text,
            codes_by_family,
            created,
            consent,
            owner=owner,
            duration_s=seconds,
            lexicons=tuple(lexicons),
        )


class VoiceStoreError(Exception):
    """The voice store's backend failed (Redis unreachable, I/O error)."""


class StoredRecord(Protocol):
    """What a store holds: a named record with its JSON form (a voice, a lexicon), whose ``owner``
    field the store's remove checks."""

    @property
    def name(self) -> str: ...

    def to_json(self) -> dict[str, object]: ...


R = TypeVar("R", bound=StoredRecord)


class RecordStore(Protocol[R]):
    """Where registered voices (or lexicons) live. Names are unique case-insensitively; a version
    string changes whenever the set of records changes. Backend failures raise ``VoiceStoreError``."""

    name: str

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def version(self) -> str:
        """The store's current version (cheap: checked on every use)."""
        ...

    async def load(self) -> tuple[str, list[R]]:
        """Every valid record and a version no newer than them (bad records are logged and skipped)."""
        ...

    async def add(self, voice: R, max_voices: int) -> AddResult:
        """Store ``voice`` unless its name is taken ("exists") or ``max_voices`` exist ("full"): atomic."""
        ...

    async def remove(self, name: str, owner: str | None) -> RemoveResult:
        """Delete the record called ``name`` ("absent" when there is none), when ``owner`` is None or is
        the owner it records ("not_owner" otherwise): atomic."""
        ...


VoiceStore = RecordStore[RegisteredVoice]


@dataclass
class VoiceRegistry:
    """Registered voices (at most ``max_voices``) in ``store``, with a copy checked on every use."""

    store: VoiceStore
    max_voices: int
    reserved: set[str] = field(default_factory=set)
    _version: str | None = field(default=None, init=False)  # of the store, when ``_voices`` was read
    _voices: dict[str, RegisteredVoice] = field(default_factory=dict, init=False)
    _reloading: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    @classmethod
    def of(cls, store: VoiceStore, max_voices: int, reserved: Iterable[str] = ()) -> VoiceRegistry:
        return cls(store, max_voices, {name.lower() for name in reserved})

    def reserve(self, names: Iterable[str]) -> None:
        """Also refuse these names (the built-in voices of a family added after construction)."""
        self.reserved.update(name.lower() for name in names)
        self._version = None  # a stored voice may now be shadowed: filter again on the next use

    async def start(self) -> None:
        """Open the store and read the voices; a store that is down now is retried on first use."""
        await self.store.start()
        try:
            voices = await self._current()
        except Unavailable as exc:
            log.warning("voice store %s not reachable at startup: %s", self.store.name, exc)
            return
        log.info("%d registered voices in the %s voice store", len(voices), self.store.name)

    async def close(self) -> None:
        await self.store.close()

    async def _current(self) -> dict[str, RegisteredVoice]:
        """The voices as the store holds them now (reloaded when its version changed). 503 when down."""
        try:
            if await self._up_to_date():
                return self._voices
            async with self._reloading:  # one reload at a time; the requests that waited use its result
                if await self._up_to_date():
                    return self._voices
                version, loaded = await self.store.load()
                return self._keep(version, loaded)
        except VoiceStoreError as exc:
            raise _down(exc) from exc

    async def _up_to_date(self) -> bool:
        """True when the copy is of the store's current version (a load reads the version first, so
        the copy holds at least what that version names)."""
        return self._version is not None and await self.store.version() == self._version

    def _keep(self, version: str, loaded: list[RegisteredVoice]) -> dict[str, RegisteredVoice]:
        """Hold ``loaded`` (less the voices a built-in one shadows) as the copy of ``version``."""
        voices = {}
        for voice in loaded:
            if voice.name.lower() in self.reserved:
                log.warning("registered voice %r is shadowed by a built-in voice; ignored", voice.name)
                continue
            voices[voice.name] = voice
        self._version, self._voices = version, voices
        return voices

    async def voices(self) -> list[RegisteredVoice]:
        """Registered voices in name order."""
        current = await self._current()
        return [current[name] for name in sorted(current)]

    async def get(self, name: str) -> RegisteredVoice | None:
        return (await self._current()).get(name)

    async def check_name(self, name: str) -> None:
        """Raise InvalidRequest (bad name, limit reached) or Conflict (taken) before any work is done.

        Advisory: ``add`` decides atomically, so two replicas that both pass here cannot both register."""
        if not NAME_RE.fullmatch(name):
            raise InvalidRequest(
                "name: use 1-64 letters, digits, '_' or '-'", param="name", code="invalid_voice_name"
            )
        if name.lower() in self.reserved:
            raise _taken(name)
        current = await self._current()
        if name.lower() in {existing.lower() for existing in current}:
            raise _taken(name)
        if len(current) >= self.max_voices:
            raise _full(self.max_voices)

    async def add(
        self,
        name: str,
        reference_text: str,
        codes: Mapping[str, list[int]],
        consent: str | None,
        now: int,
        owner: str | None = None,
        duration_s: float | None = None,
        lexicons: Sequence[str] = (),
    ) -> RegisteredVoice:
        """Store a new voice with its codes per family and the lexicons attached to it, owned by
        ``owner`` (a key's tenant; None when keys are off); what is stored is exactly what loads back.
        Raises as ``check_name``; 500 for a record that would not load back; 503: store down."""
        await self.check_name(name)
        by_family = {f: tuple(c) for f, c in codes.items()}
        voice = RegisteredVoice(
            name,
            reference_text,
            by_family,
            now,
            consent,
            owner=owner,
            duration_s=duration_s,
            lexicons=tuple(lexicons),
        )
        _check_reads_back(voice)
        try:
            result = await self.store.add(voice, self.max_voices)
        except VoiceStoreError as exc:
            raise _down(exc) from exc
        if result == "exists":
            raise _taken(name)
        if result == "full":
            raise _full(self.max_voices)
        self._version = None
        return voice

    async def remove(self, name: str, owner: str | None = None) -> None:
        """Delete a registered voice: any one (``owner`` None), or only one ``owner`` registered.
        NotFound when there is none by that name, Forbidden when it is not ``owner``'s; 503: store down."""
        try:
            result = await self.store.remove(name, owner) if NAME_RE.fullmatch(name) else "absent"
        except VoiceStoreError as exc:
            raise _down(exc) from exc
        if result == "absent":
            raise NotFound(f"No registered voice called {echo(name)}.", param="name", code="voice_not_found")
        if result == "not_owner":
            raise Forbidden(
                f"The voice {echo(name)} was not registered with this API key: only the key that "
                "registered it, or an admin key, can delete it.",
                param="name",
                code="voice_not_owned",
            )
        self._version = None


def _check_reads_back(voice: RegisteredVoice) -> None:
    """500 for a voice whose record the loader would not read back as this very voice (the stores write
    ``to_json``; a record ``load`` skips would hold a name and a slot of the limit, unusable)."""
    try:
        loaded = RegisteredVoice.from_json(json.loads(json.dumps(voice.to_json())))
    except ValueError as exc:
        raise APIError(f"The voice {echo(voice.name)} could not be stored.", detail=str(exc)) from exc
    if loaded != voice:
        raise APIError(f"The voice {echo(voice.name)} could not be stored.", detail="it reads back changed")


def _taken(name: str) -> Conflict:
    return Conflict(f"name: a voice called {echo(name)} already exists", param="name", code="voice_exists")


def _full(max_voices: int) -> InvalidRequest:
    return InvalidRequest(
        f"At most {max_voices} voices can be registered; delete one first.",
        param="name",
        code="voice_limit_reached",
    )


def _down(exc: VoiceStoreError) -> Unavailable:
    log.warning("voice store failed: %s", exc)
    return Unavailable("The voice registry is unavailable; try again later.", code="voice_store_unavailable")
