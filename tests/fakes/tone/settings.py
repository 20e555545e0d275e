"""The tone family's settings: its own fields on top of the shared ones."""

from __future__ import annotations

from pydantic import Field

from app.core.settings import ServerSettings


class ToneSettings(ServerSettings):
    """The tone family (``MODEL_FAMILIES=...,tone``)."""

    TONE_FRAMES_PER_WORD: int = Field(4, ge=1, description="Tone frames (80 ms each) spoken per word.")
    TONE_MAX_FRAMES: int = Field(100, ge=1, description="Frames per request when it sets no max_tokens.")
    TONE_FRAME_DELAY_S: float = Field(0.0, ge=0, description="Pacing of each frame (0: as fast as it can).")
