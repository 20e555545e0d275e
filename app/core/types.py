"""Small shared type aliases: span attributes and why a generation ended."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
Attributes = Mapping[str, AttributeValue | None]
"""Span attributes (OpenTelemetry's value types; None values are dropped)."""

FinishReason = Literal["stop", "length", "error", "cancelled"]
"""Why a generation ended: the model stopped, hit max_tokens, failed, or was cancelled."""

NormalizerMode = Literal["rule", "spoken", "llm"]
"""How text is normalized: rules, spoken-form rules, or an LLM."""
Language = Literal["auto", "en", "ms", "zh", "ta"]
"""A text's language; auto detects it per sentence."""
ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]
"""The audio formats a response can be encoded in."""
