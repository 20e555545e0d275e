"""Route paths, defined once: the route decorators and the middlewares that act on paths use these."""

from __future__ import annotations

SPEECH = "/v1/audio/speech"
VC = "/v1/audio/vc"
VOICES = "/v1/audio/voices"
VOICE = "/v1/audio/voices/{name}"
NORMALIZE = "/v1/audio/normalize"
LEXICONS = "/v1/audio/lexicons"
LEXICON = "/v1/audio/lexicons/{name}"
INTERLEAVE = "/v1/audio/interleave/{interleave_id:path}"
MODELS = "/v1/models"
SPEAKERS = "/v1/audio/speaker"
ROOT = "/"
HEALTH = "/health"
READY = "/ready"
METRICS = "/metrics"
DOCS = "/scalar"
SWAGGER_DOCS = "/docs"
DOCS_ASSETS = "/docs/assets"
"""The API reference pages' scripts and styles (served by the app, app/api/docs_pages.py)."""
API_PREFIX = "/v1"

SYNTHESIS_PATHS = frozenset({SPEECH, VC})
"""Routes that stream audio: admission control, first-audio metrics and the OpenAPI audio docs."""
UPLOAD_PATHS = frozenset({VC, VOICES})
"""Routes that take a multipart audio upload: the upload size cap."""
ADMITTED_PATHS = SYNTHESIS_PATHS | {VOICES}
"""POSTs that hold a stream slot: synthesis, and voice registration (it decodes and encodes a clip)."""
UNTRACED_PATHS = (HEALTH, READY, METRICS, DOCS, "/openapi.json", SWAGGER_DOCS, "/favicon.ico")
"""Probe and documentation routes that get no server span."""
