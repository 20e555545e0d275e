"""The parts the precision tool can run, by name. A model family adds its parts here."""

from __future__ import annotations

from app.tools.precision.parts.base import Part
from app.tools.precision.parts.moss_codec import MossCodecPart
from app.tools.precision.parts.moss_lm import MossBackbonePart, MossLMPart
from app.tools.precision.parts.neucodec_decoder import NeuCodecDecoderPart
from app.tools.precision.parts.neucodec_lm import NeuCodecLMPart

PARTS: dict[str, Part] = {
    part.name: part
    for part in (NeuCodecLMPart(), NeuCodecDecoderPart(), MossBackbonePart(), MossLMPart(), MossCodecPart())
}


def get_part(name: str) -> Part:
    """The part called ``name``; ValueError naming the known parts otherwise."""
    if name not in PARTS:
        raise ValueError(f"unknown part {name!r}: use one of {', '.join(PARTS)}")
    return PARTS[name]
