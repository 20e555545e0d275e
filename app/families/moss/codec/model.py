"""MossAudioCodec: 24 kHz waveform <-> codes ``[frames, codebooks]``, one-shot or streamed per stream.

Module tree and keys as in the official checkpoint: ``encoder`` (patch 240, transformer, patch 2, ...),
``quantizer`` (residual LFQ), ``decoder`` (transformer, patch 2 up, ..., patch 240 up). Built without the
encoder (``with_encoder=False``) it is a decoder: nothing of the encoder is allocated or read.

Frame arithmetic: one frame is ``downsample_rate`` = 1920 samples (80 ms at 24 kHz). ``encode`` returns
``len(audio) // 1920`` frames: a partial last frame is dropped, not padded (the official one-shot encode
adds it, coded from zero-padding, and reports it as beyond the valid length). ``decode`` of F frames gives
exactly ``1920 * F`` samples.

Streaming decode: ``new_state()`` gives a stream its own caches (``DecoderState``); ``decode_step`` turns
the next frames of several streams at once into the audio of exactly those frames. The decoder is causal
and keeps every key its window needs, so any chunking gives the one-shot audio (to float rounding), at
any length. A step of more than ``MAX_STEP_FRAMES`` frames is run as several steps.
"""

from __future__ import annotations

import torch
from torch import nn

from app.families.moss.codec.config import MossCodecConfig
from app.families.moss.codec.quantizer import ResidualLFQ
from app.families.moss.codec.stages import StageStack
from app.families.moss.codec.transformer import StageCache

MAX_STEP_FRAMES = 8
"""Most frames one streamed step decodes (rings hold ``context + positions(MAX_STEP_FRAMES) - 1`` slots)."""


class DecoderState:
    """One stream's decoder state: the key/value rings of every decoder transformer, and frames decoded."""

    def __init__(self, caches: list[StageCache]) -> None:
        self.caches: list[StageCache] | None = caches
        self.frames = 0

    @property
    def nbytes(self) -> int:
        """Bytes held by the rings (0 once released)."""
        return sum(c.kv.nbytes for c in self.caches or [])

    @property
    def released(self) -> bool:
        return self.caches is None

    def release(self) -> None:
        """Drop the rings (their memory is freed once no batch in flight uses them)."""
        self.caches = None


class MossAudioCodec(nn.Module):
    """The codec (see module docstring). Inputs and outputs live on the model's device."""

    def __init__(self, config: MossCodecConfig, with_encoder: bool = True) -> None:
        super().__init__()
        self.config = config
        self.encoder = StageStack(config.encoder, down=True) if with_encoder else None
        self.quantizer = ResidualLFQ(config.quantizer)
        self.decoder = StageStack(config.decoder, down=False)

    @property
    def samples_per_frame(self) -> int:
        return self.config.downsample_rate

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def decoder_dtype(self) -> torch.dtype:
        return next(self.decoder.parameters()).dtype

    def new_state(self) -> DecoderState:
        """Fresh decoder caches for one stream (zeros, on the model's device and decoder dtype)."""
        return DecoderState(self.decoder.new_caches(MAX_STEP_FRAMES, self.device, self.decoder_dtype))

    def _decode_rows(self, parts: list[torch.Tensor], caches: list[list[StageCache]] | None) -> torch.Tensor:
        """codes of several sequences ``[T_b, nq]`` -> their audio, packed: ``[sum(T_b) * 1920]``."""
        latent = self.quantizer.decode(torch.cat(parts))  # [N, output_dim], fp32
        audio = self.decoder(latent, [p.shape[0] for p in parts], caches)  # [1920 N, 1]
        return audio.float().reshape(-1)

    @torch.inference_mode()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """One-shot: codes ``[B, F, nq]`` (or ``[F, nq]``) -> audio ``[B, 1920 F]`` (``[1920 F]``)."""
        single = codes.dim() == 2
        batch = codes[None] if single else codes
        self._check_codes(batch)
        audio = self._decode_rows(list(batch), None).view(batch.shape[0], -1)
        return audio[0] if single else audio

    @torch.inference_mode()
    def decode_step(self, chunks: list[torch.Tensor], states: list[DecoderState]) -> list[torch.Tensor]:
        """Streamed: the next frames of several streams, chunk b ``[T_b, nq]`` -> ``[1920 T_b]`` float32.

        Each stream's state advances by its chunk; a stream appears at most once. Chunks of any lengths
        are decoded together (rows of one batch); longer ones than ``MAX_STEP_FRAMES`` take several steps.
        """
        if len({id(s) for s in states}) != len(states):
            raise ValueError("a stream appears twice in one decode step")
        caches = [state.caches for state in states]  # read once: a stream may be closed meanwhile
        if any(c is None for c in caches):
            raise ValueError("decode_step on a released stream state")
        for chunk in chunks:
            self._check_codes(chunk[None])
        outputs: list[list[torch.Tensor]] = [[] for _ in chunks]
        done = 0
        while True:
            active = [b for b, chunk in enumerate(chunks) if chunk.shape[0] > done]
            if not active:
                break
            parts = [chunks[b][done : done + MAX_STEP_FRAMES] for b in active]
            audio = self._decode_rows(parts, [caches[b] for b in active])  # type: ignore[misc]
            sizes = [p.shape[0] * self.samples_per_frame for p in parts]
            for b, piece in zip(active, audio.split(sizes), strict=True):
                outputs[b].append(piece)
                states[b].frames += piece.shape[0] // self.samples_per_frame
            done += MAX_STEP_FRAMES
        empty = torch.zeros(0, device=self.device)
        return [torch.cat(parts) if parts else empty for parts in outputs]

    @torch.inference_mode()
    def encode(self, audios: list[torch.Tensor], num_quantizers: int | None = None) -> list[torch.Tensor]:
        """Clips ``[S_b]`` (24 kHz float) -> codes ``[S_b // 1920, nq]`` int64, all clips in one batch.

        The encoder is causal, so each clip's codes are those it gets alone. Raises ValueError without an
        encoder, for a clip shorter than one frame, or for ``num_quantizers`` out of range.
        """
        if self.encoder is None:
            raise ValueError("this codec was loaded without its encoder (decode only)")
        nq = self.config.num_quantizers if num_quantizers is None else num_quantizers
        if not 1 <= nq <= self.config.num_quantizers:
            raise ValueError(f"num_quantizers must be in [1, {self.config.num_quantizers}], got {nq}")
        frames = [int(a.shape[-1]) // self.samples_per_frame for a in audios]
        if not audios or min(frames) < 1:
            raise ValueError(f"every clip needs at least {self.samples_per_frame} samples (one frame)")
        clips = [a.reshape(-1)[: f * self.samples_per_frame] for a, f in zip(audios, frames, strict=True)]
        x = torch.cat(clips).to(self.device, torch.float32)[:, None]  # [sum S, 1]
        features = self.encoder(x, [c.shape[0] for c in clips])  # [sum F, input_dim]
        codes = self.quantizer.encode(features.float(), nq)
        return list(codes.split(frames))

    def _check_codes(self, codes: torch.Tensor) -> None:
        nq = codes.shape[-1]
        if codes.dim() != 3 or not 1 <= nq <= self.config.num_quantizers:
            raise ValueError(
                f"codes must be [frames, codebooks] with 1..{self.config.num_quantizers} codebooks, "
                f"got shape {tuple(codes.shape[1:])}"
            )
        if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= self.config.codebook_size):
            raise ValueError(f"codes must be in [0, {self.config.codebook_size})")
