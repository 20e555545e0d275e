"""A LiveKit voice agent that speaks through this server with LiveKit's ``openai.TTS`` plugin.

Each room is one conversation, so the room name is sent as ``X-Interleave-Id`` on every request:
servers with the interleave store keep that conversation's recent turns as context for the next one
(servers without it ignore the header).

    pip install livekit-agents livekit-plugins-openai
    export LIVEKIT_URL=wss://... LIVEKIT_API_KEY=... LIVEKIT_API_SECRET=...
    TTS_API_BASE_URL=http://localhost:9091 python examples/livekit_agent.py dev

Needs a LiveKit server and a room to join; this example only speaks (add stt= and llm= to the
AgentSession for a full conversation).
"""

from __future__ import annotations

import os

import openai
from livekit.agents import Agent, AgentSession, JobContext, WorkerOptions, cli
from livekit.plugins import openai as lk_openai


def make_client(base_url: str, conversation_id: str) -> openai.AsyncClient:
    """An OpenAI client of our server that sends ``X-Interleave-Id`` on every request."""
    return openai.AsyncClient(
        api_key="not-needed",
        base_url=f"{base_url}/v1",
        default_headers={"X-Interleave-Id": conversation_id},
        max_retries=0,
    )


def make_tts(client: openai.AsyncClient) -> lk_openai.TTS:
    """``openai.TTS`` on that client: tts-1 and raw pcm, the lowest latency."""
    return lk_openai.TTS(client=client, model="tts-1", voice="alloy", response_format="pcm")


async def entrypoint(ctx: JobContext) -> None:
    """Join the room and greet whoever is there."""
    await ctx.connect()
    client = make_client(os.environ.get("TTS_API_BASE_URL", "http://localhost:9091"), ctx.room.name)
    ctx.add_shutdown_callback(client.close)  # the plugin does not close a client it was given
    session = AgentSession(tts=make_tts(client))
    await session.start(agent=Agent(instructions="You are a helpful call-centre agent."), room=ctx.room)
    await session.say("Selamat datang! Hello, how can I help you today?")


if __name__ == "__main__":
    cli.run_app(WorkerOptions(entrypoint_fnc=entrypoint))
