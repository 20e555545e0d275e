"""What one synthesis consumed and produced: read by metrics, spans, SSE usage and interleave."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from app.core.types import Attributes, FinishReason


@dataclass
class UtteranceStats:
    """What one synthesis consumed and produced, filled in as it runs."""

    codes: int = 0  # speech tokens generated
    prompt_tokens: int | None = None  # LM tokens in the prompt, when the backend reports them
    finish_reason: FinishReason | None = None  # set once the LM stream ends, before the last decodes
    tokens: list[int] = field(default_factory=list)  # the generated codes, in order
    samples: int = 0  # audio samples yielded
    decodes: int = 0  # codec calls
    lm_wait_s: float = 0.0  # waiting for LM codes with nothing left to decode
    decode_wait_s: float = 0.0  # waiting for the codec
    generation_s: float = 0.0  # start of the synthesis to its end
    parked_s: float = 0.0  # a streamed turn's generation waiting for its text (realtime sessions)
    stall_s: float = 0.0  # a listener playing from the first chunk in real time: time its buffer was empty

    def span_attributes(self) -> Attributes:
        """The ``tts.stream`` aggregates (``tts.audio_bytes`` counts 16-bit PCM)."""
        return {
            "tts.lm_wait_s": self.lm_wait_s,
            "tts.decode_wait_s": self.decode_wait_s,
            "tts.decodes": self.decodes,
            "tts.audio_bytes": self.samples * 2,
            "tts.codes": self.codes,
        }

    def reset(self) -> None:
        """Back to the empty record (a family that regenerates an utterance starts it over)."""
        fresh = UtteranceStats()
        for item in fields(self):
            setattr(self, item.name, getattr(fresh, item.name))
