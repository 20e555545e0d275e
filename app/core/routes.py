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
REALTIME = "/v1/audio/speech/realtime"
"""Our realtime protocol over WebSocket (docs/realtime.md)."""
CARTESIA_WEBSOCKET = "/tts/websocket"
CARTESIA_BYTES = "/tts/bytes"
"""The Cartesia-compatible face: its streaming WebSocket and its whole-text POST."""
REALTIME_ASYNCAPI = "/v1/audio/speech/realtime/asyncapi.json"
API_PREFIX = "/v1"
KEYED_PATHS = (CARTESIA_WEBSOCKET, CARTESIA_BYTES)
REALTIME_PATHS = frozenset({REALTIME, CARTESIA_WEBSOCKET})
"""The realtime WebSockets (counted by their path also when refused before routing)."""
"""Routes outside ``/v1`` that need an API key all the same."""

SYNTHESIS_PATHS = frozenset({SPEECH, VC, CARTESIA_BYTES})
"""Routes that stream audio: admission control, first-audio metrics and the OpenAPI audio docs."""
UPLOAD_PATHS = frozenset({VC, VOICES})
"""Routes that take a multipart audio upload: the upload size cap."""
ADMITTED_PATHS = SYNTHESIS_PATHS | {VOICES}
"""POSTs that hold a stream slot: synthesis, and voice registration (it decodes and encodes a clip)."""
UNTRACED_PATHS = (HEALTH, READY, METRICS, DOCS, "/openapi.json", SWAGGER_DOCS, "/favicon.ico")
"""Probe and documentation routes that get no server span."""
