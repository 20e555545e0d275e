#!/usr/bin/env bash
# The API with curl, against `make demo` (or any server: TTS_API_BASE_URL). The audio files land in the
# current directory; the SSE transcript goes to a temporary file, removed at the end. The demo's random
# checkpoints make noise, not speech.
set -euo pipefail
BASE=${TTS_API_BASE_URL:-http://localhost:9091}
EVENTS=$(mktemp)
trap 'rm -f "$EVENTS"' EXIT

curl -sf "$BASE/health"; echo
curl -sf "$BASE/v1/models"; echo
curl -sf "$BASE/v1/audio/voices"; echo

# the whole file (stream=false sends Content-Length)
curl -sf "$BASE/v1/audio/speech" -H 'Content-Type: application/json' \
  -d '{"input": "Hello! How can I help you?", "voice": "alloy", "response_format": "wav", "stream": false, "max_tokens": 300}' \
  -o hello.wav

# raw 24 kHz s16le mono as it is generated; play with: ffplay -f s16le -ar 24000 -ch_layout mono stream.pcm
curl -sfN "$BASE/v1/audio/speech" -H 'Content-Type: application/json' \
  -d '{"input": "Streaming while it speaks.", "voice": "nova", "response_format": "pcm", "playback_speed": 0.5, "max_tokens": 300}' \
  -o stream.pcm

# mp3 in OpenAI SSE events (base64 audio in speech.audio.delta, then speech.audio.done with usage)
curl -sfN "$BASE/v1/audio/speech" -H 'Content-Type: application/json' \
  -d '{"input": "Events please.", "voice": "alloy", "response_format": "mp3", "stream_format": "sse", "max_tokens": 300}' \
  -o "$EVENTS"
head -c 200 "$EVENTS"; echo; tail -n 4 "$EVENTS"

# the text front end alone
curl -sf "$BASE/v1/audio/normalize" -H 'Content-Type: application/json' \
  -d '{"input": "Your total is RM1,250.50 and the meeting is at 3pm on 12/9/2026.", "mode": "spoken"}'; echo

ls -l hello.wav stream.pcm
