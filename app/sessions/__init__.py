"""Realtime sessions: text streamed in as an agent's LLM writes it, speech streamed out, over one
WebSocket connection, for every model family.

A ``Session`` is one connection: several contexts (turns), each with its own voice, model, language
and output format, at most ``REALTIME_MAX_CONTEXTS`` open at once. A ``Context`` takes text deltas of
any size, cuts them into pieces that can be normalized alone (``app.text.stream_split``), normalizes
each piece as a request's text is (lexicons, the normalizer), and pushes it into its family's speech
stream (``ModelFamily.open_stream``: MOSS feeds one running generation, NeuCodec generates segment by
segment); what comes out goes through the shared post chain (loudness, speed, fade, the encoder at the
requested rate) and out as events (``events.py``), with word timings in seconds of the audio sent.
The protocol faces (``app.api.realtime``: Cartesia's and our own) only translate messages into these
calls and events into messages.
"""
