"""The parts the precision tool can run, by name. A model family adds its parts here."""

from __future__ import annotations

from app.families.moss.precision.codec import MossCodecPart
from app.families.moss.precision.lm import MossBackbonePart, MossLMPart
from app.families.neucodec.precision.decoder import NeuCodecDecoderPart
from app.families.neucodec.precision.lm import NeuCodecLMPart
from app.families.shared.precision_part import Part

PARTS: dict[str, Part] = {
    part.name: part
    for part in (NeuCodecLMPart(), NeuCodecDecoderPart(), MossBackbonePart(), MossLMPart(), MossCodecPart())
}


def get_part(name: str) -> Part:
    """The part called ``name``; ValueError naming the known parts otherwise."""
    if name not in PARTS:
        raise ValueError(f"unknown part {name!r}: use one of {', '.join(PARTS)}")
    return PARTS[name]
