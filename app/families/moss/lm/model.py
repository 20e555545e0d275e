"""MOSS-TTS-Realtime as our own module: 17 input tables, transformers' ``Qwen3Model``, the local transformer.

A row ``[text_id, a1..a16]`` is embedded as the sum of its 17 lookups, added in column order in the model
dtype (``embed_tokens.0`` is the text table, ``embed_tokens.1..16`` the audio ones). The backbone is a
plain ``transformers.Qwen3Model`` (no remote code) fed ``inputs_embeds``; its normed last hidden state of
a row feeds the local transformer (``local.py``), which emits the next frame one codebook at a time.

The checkpoint also holds ``language_model.embed_tokens.weight`` (the Qwen3 text table, byte-identical to
``embed_tokens.0`` in the release). The backbone never reads it, because ``inputs_embeds`` is always
passed, so our backbone has no such module (``UNUSED_KEYS``): the loader accepts the key, checks its
shape, and does not read it (311 M parameters, 1.2 GB in float32, never allocated).

The forwards here (``embed``, ``backbone``, ``LocalTransformer.step``) never sample: sampling stays
outside, in ``sampling.py``, so the forwards could be captured by a CUDA/NPU graph later.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from app.families.moss.lm.config import MossLMConfig
from app.families.moss.lm.local import LocalTransformer
from app.families.moss.lm.types import AUDIO_PAD, AUDIO_VOCAB, CODEBOOKS
from app.lm.padded_cache import new_cache

TEXT_TABLE_KEY = "language_model.embed_tokens.weight"
UNUSED_KEYS = (TEXT_TABLE_KEY,)


def qwen3_config(config: MossLMConfig, attention: str) -> Any:
    """The backbone's ``transformers.Qwen3Config`` with ``attention`` as its attention implementation."""
    from transformers import Qwen3Config

    language = {k: v for k, v in config.language.items() if k != "model_type"}
    qwen = Qwen3Config.from_dict(language)
    qwen._attn_implementation = attention
    return qwen


class MossTTSRealtime(nn.Module):
    """The whole LM. ``backbone_attention`` is a transformers attention implementation ("sdpa", "eager" or
    ``app.lm.attention.FP32_SDPA``); ``local_attention`` is "sdpa", "eager" or "sdpa_fp32"."""

    def __init__(
        self, config: MossLMConfig, backbone_attention: str = "sdpa", local_attention: str = "sdpa"
    ) -> None:
        super().__init__()
        from transformers import Qwen3Model

        hidden = config.hidden_size
        self.config = config
        self.embed_tokens = nn.ModuleList(
            [nn.Embedding(config.vocab_size, hidden, padding_idx=config.text_pad_id)]
            + [nn.Embedding(AUDIO_VOCAB, hidden, padding_idx=AUDIO_PAD) for _ in range(CODEBOOKS)]
        )
        self.language_model = Qwen3Model(qwen3_config(config, backbone_attention))
        # unused: inputs_embeds is always passed (see UNUSED_KEYS); transformers types it as a module
        self.language_model.embed_tokens = None  # type: ignore[assignment]
        self.local_transformer = LocalTransformer(config.local, local_attention)

    def reset_rotary(self) -> None:
        """Recompute the backbone's RoPE buffers (non-persistent: garbage after ``to_empty``)."""
        rotary = self.language_model.rotary_emb
        device = self.local_transformer.model.norm.weight.device
        fresh = type(rotary)(rotary.config).to(device)
        self.language_model.rotary_emb = fresh

    def embed(self, rows: torch.Tensor) -> torch.Tensor:
        """``rows`` [B, T, 17] int64 -> [B, T, H]: the 17 lookups summed in column order."""
        out = self.embed_tokens[0](rows[..., 0])
        for column in range(1, CODEBOOKS + 1):
            out = out + self.embed_tokens[column](rows[..., column])
        return out

    def backbone(
        self,
        rows: torch.Tensor,
        cache: Any,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, Any]:
        """Feed ``rows`` [B, T, 17] after ``cache`` (a transformers ``Cache``, or None for a new one of
        growing layers: ``app.lm.padded_cache.new_cache``): the normed hidden
        state of each row's last position [B, H] and the grown cache. ``attention_mask`` [B, past + T]
        (1 = a real row) and ``position_ids`` [B, T] are for left-padded batches."""
        if cache is None:
            cache = new_cache(self.language_model.config)
        out = self.language_model(
            inputs_embeds=self.embed(rows),
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=True,
        )
        return out.last_hidden_state[:, -1], out.past_key_values


def official_layout(config: MossLMConfig) -> dict[str, torch.Size]:
    """Every key of an official checkpoint of ``config`` with its shape (403 at the real size), built on
    ``meta``: our module's keys plus ``UNUSED_KEYS``."""
    with torch.device("meta"):
        model = MossTTSRealtime(config)
    layout = {key: tensor.shape for key, tensor in model.state_dict().items()}
    layout[TEXT_TABLE_KEY] = torch.Size((config.vocab_size, config.hidden_size))
    return layout
