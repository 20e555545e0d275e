"""The family's built-in voices: ``default`` (no voice prompt: the model's own voice) and the clips an
operator ships in MOSS_VOICES_DIR (``<name>.wav``, the voice called by the file's stem), encoded by the
MOSS codec at startup. OpenAI's voice names are aliases of the default voice.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import numpy as np

from app.audio.io import load_reference
from app.core.voices import OPENAI_VOICES, VoiceCatalog
from app.families.moss.settings import MossSettings

log = logging.getLogger(__name__)

DEFAULT_VOICE = "default"
"""The voice with no voice prompt."""
NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")  # matched whole (fullmatch)
CODEBOOKS = 16

Encode = Callable[[np.ndarray, str], Awaitable[list[int]]]
"""24 kHz samples and their digest -> codes, flat and frame-major."""


def clip_paths(directory: str) -> dict[str, Path]:
    """``name -> path`` of the ``*.wav`` clips in ``directory`` (none when it is empty); a stem that is
    not a valid voice name (1-64 of A-Z a-z 0-9 _ -) or is ``default`` is skipped with a warning."""
    if not directory:
        return {}
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ValueError(f"MOSS_VOICES_DIR={directory!r} is not a directory")
    clips: dict[str, Path] = {}
    for path in sorted(root.glob("*.wav")):
        if not NAME_RE.fullmatch(path.stem) or path.stem == DEFAULT_VOICE:
            log.warning("MOSS voice clip %s skipped: its name is not a usable voice name", path.name)
            continue
        clips[path.stem] = path
    return clips


def catalog(settings: MossSettings, clips: dict[str, Path]) -> VoiceCatalog:
    """``default`` and the clips' voices, MOSS_DEFAULT_VOICE as the default, OpenAI's names as aliases of
    it (unless a clip has that name). ValueError when MOSS_DEFAULT_VOICE names no voice."""
    voices = (DEFAULT_VOICE, *clips)
    default = settings.MOSS_DEFAULT_VOICE
    if default not in voices:
        raise ValueError(f"MOSS_DEFAULT_VOICE={default!r} is not one of the MOSS voices {list(voices)}")
    aliases = {name: default for name in OPENAI_VOICES if name not in clips}
    return VoiceCatalog(voices, default, aliases)


async def encode_clips(
    settings: MossSettings, clips: dict[str, Path], encode: Encode
) -> dict[str, np.ndarray]:
    """Each clip's codes ``(frames, 16)``: read, decoded to 24 kHz mono (MIN/MAX_REFERENCE_S apply) in a
    worker thread, then encoded. Raises InvalidRequest for a clip that is not usable audio."""
    codes: dict[str, np.ndarray] = {}
    for name, path in clips.items():
        data = await asyncio.to_thread(path.read_bytes)
        audio = await asyncio.to_thread(
            load_reference,
            data,
            min_s=settings.MIN_REFERENCE_S,
            max_s=settings.MAX_REFERENCE_S,
            param=f"MOSS_VOICES_DIR/{path.name}",
            rate=24_000,
        )
        flat = await encode(audio.samples, audio.digest)
        codes[name] = np.asarray(flat, dtype=np.int64).reshape(-1, CODEBOOKS)
        log.info("MOSS voice %r: %d frames from %s", name, len(codes[name]), path.name)
    return codes
