"""The AsyncAPI 3.0 description of the realtime protocol (``app.api.realtime``), served beside the
OpenAPI document and pinned by a test like it."""

from __future__ import annotations

from typing import Any

from app.core import routes


def _message(name: str, summary: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    props = {"type": {"const": name}, **properties}
    return {
        "name": name,
        "summary": summary,
        "contentType": "application/json",
        "payload": {"type": "object", "properties": props, "required": ["type", *required]},
    }


_CONTEXT = {"type": "string", "description": "The context (turn) the message is about."}
_OPTIONS = {
    "type": "object",
    "description": "A context's options; each left out is the server's default.",
    "properties": {
        "model": {"type": "string"},
        "voice": {"type": "string"},
        "response_format": {
            "enum": [
                "mp3",
                "opus",
                "aac",
                "flac",
                "wav",
                "pcm",
                "pcm_s16le",
                "pcm_f32le",
                "pcm_mulaw",
                "pcm_alaw",
            ]
        },
        "sample_rate": {"type": "integer", "minimum": 8000, "maximum": 48000},
        "speed": {"type": "number", "minimum": 0.5, "maximum": 2.0},
        "language": {"enum": ["auto", "en", "ms", "zh", "ta"]},
        "mode": {"enum": ["rule", "spoken", "llm"]},
        "timestamps": {"type": "boolean"},
        "lexicons": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
        "audio": {"enum": ["binary", "base64"]},
        "temperature": {"type": "number"},
        "top_p": {"type": "number"},
        "top_k": {"type": "integer"},
        "seed": {"type": "integer"},
        "max_tokens": {"type": "integer"},
        "repetition_penalty": {"type": "number"},
    },
    "additionalProperties": False,
}
_ERROR = {
    "type": "object",
    "properties": {
        "message": {"type": "string"},
        "type": {"type": "string"},
        "param": {"type": ["string", "null"]},
        "code": {"type": ["string", "null"]},
    },
}

CLIENT = {
    "session.update": _message(
        "session.update", "Defaults of the contexts opened after it.", {"session": _OPTIONS}, ["session"]
    ),
    "context.create": _message(
        "context.create",
        "Open a context with its own options.",
        {"context_id": _CONTEXT, "options": _OPTIONS},
        [],
    ),
    "input.text": _message(
        "input.text",
        "A delta of a context's text (its first opens the context).",
        {"context_id": _CONTEXT, "seq": {"type": "integer", "minimum": 0}, "text": {"type": "string"}},
        ["text"],
    ),
    "input.flush": _message("input.flush", "Speak what is pending now.", {"context_id": _CONTEXT}, []),
    "input.done": _message("input.done", "The context's text has ended.", {"context_id": _CONTEXT}, []),
    "context.cancel": _message(
        "context.cancel", "Stop the context now (barge-in).", {"context_id": _CONTEXT}, []
    ),
    "session.close": _message("session.close", "Cancel every context and close.", {}, []),
}
SERVER = {
    "session.created": _message(
        "session.created", "The session is open.", {"session_id": {"type": "string"}, "session": _OPTIONS}, []
    ),
    "input.ack": _message(
        "input.ack",
        "A numbered text delta was taken.",
        {"context_id": _CONTEXT, "seq": {"type": "integer"}},
        [],
    ),
    "audio.delta": _message(
        "audio.delta",
        "Audio of a context in its response_format, base64 (with audio=base64; else a binary frame: one "
        "byte n, n bytes of the context id, the audio).",
        {"context_id": _CONTEXT, "audio": {"type": "string", "contentEncoding": "base64"}},
        ["audio"],
    ),
    "word.timestamps": _message(
        "word.timestamps",
        "Written words and their place in the audio sent, in seconds (after the speed change).",
        {
            "context_id": _CONTEXT,
            "words": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "word": {"type": "string"},
                        "start": {"type": "number"},
                        "end": {"type": "number"},
                    },
                },
            },
        },
        ["words"],
    ),
    "input.flushed": _message(
        "input.flushed", "The text before a flush was handed to the model.", {"context_id": _CONTEXT}, []
    ),
    "context.done": _message(
        "context.done",
        "Everything of the context was spoken and sent.",
        {"context_id": _CONTEXT, "usage": {"type": "object"}},
        [],
    ),
    "error": _message(
        "error",
        "A message or a context failed (context_id null: a message naming none); the connection goes on.",
        {"context_id": {"type": ["string", "null"]}, "error": _ERROR},
        ["error"],
    ),
}

DOCUMENT: dict[str, Any] = {
    "asyncapi": "3.0.0",
    "info": {
        "title": "Realtime speech",
        "version": "1.0.0",
        "description": "Text streamed in as it is written, speech streamed out (docs/realtime.md).",
    },
    "channels": {
        "realtime": {
            "address": routes.REALTIME,
            "messages": {
                **{f"client.{k}": v for k, v in CLIENT.items()},
                **{f"server.{k}": v for k, v in SERVER.items()},
            },
        }
    },
    "operations": {
        "send": {
            "action": "receive",
            "channel": {"$ref": "#/channels/realtime"},
            "messages": [{"$ref": f"#/channels/realtime/messages/client.{k}"} for k in CLIENT],
        },
        "receive": {
            "action": "send",
            "channel": {"$ref": "#/channels/realtime"},
            "messages": [{"$ref": f"#/channels/realtime/messages/server.{k}"} for k in SERVER],
        },
    },
}
