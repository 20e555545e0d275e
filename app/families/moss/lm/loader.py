"""Load MOSS-TTS-Realtime from a local directory or a Hugging Face id in the official layout.

A source holds ``config.json`` (with ``language_config`` and ``local_config``), the weights
(``model.safetensors`` or shards listed by ``model.safetensors.index.json``) and the tokenizer. Tensors
are matched by the official names, strictly: a missing, unexpected or mis-shaped key fails with the list
before anything is allocated. ``language_model.embed_tokens.weight`` is accepted and shape-checked but not
read (``model.UNUSED_KEYS``). The model is laid out on ``meta``, then materialised on the device and
filled one tensor at a time (cast to the target dtype), so a full-size load pays no random
initialisation and never holds the weights twice.

Defaults (``"auto"``):

- dtype (``choose_precision``): bfloat16 on cuda and npu (the released weights' dtype); on a cpu, the
  codec's hardware rule (``app.codec.precision.cpu_bf16_matmul``): bfloat16 where the CPU has bf16 matrix
  instructions (AMX or AVX-512-BF16, and oneDNN not held below them by ``ONEDNN_MAX_CPU_ISA``), float32
  elsewhere, where bf16 is emulated and many times slower. In bf16 the whole LM's next-code
  distributions stay within the precision tool's limits against float32 (``moss-lm``: top-1 agreement
  >= 0.95, mean KL <= 0.001; measured 97.7% and 0.0001 at the released size, docs/precision.md), and on
  such a CPU a batch of rows costs about what one row does, so it batches far better than float32.
  An explicit dtype always wins; bf16 or fp16 asked for on a CPU without them is flagged ``slow``.
- attention: ``sdpa`` on cuda and npu, and on cpu too: in float32 it gives eager's logits (max
  difference 7e-6 at the released size; tested equal on the tiny model) and is as fast
  (``bench/moss_lm_bench.py``, 2-core AMD EPYC, full size, float32, two runs: backbone step 286-290 ms
  with sdpa against 298-303 ms eager; a frame's 16 local forwards 646-662 ms against 649-651 ms, noise).
- ``sdpa_fp32`` keeps the weights in the chosen dtype but computes ``softmax(q kᵀ/√d) v`` in float32
  (backbone through ``app.lm.attention``, local transformer by upcasting q, k, v).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from app import hub
from app.codec.precision import cpu_bf16_matmul, cpu_flags
from app.core.device import resolve_device
from app.families.moss.lm.config import CONFIG_FILENAME, MossLMConfig, read_config
from app.families.moss.lm.model import UNUSED_KEYS, MossTTSRealtime
from app.families.moss.lm.types import Precision, SpecialIds
from app.lm.attention import FP32_SDPA, attention_implementation
from app.observability.startup_errors import ModelSourceError

log = logging.getLogger(__name__)

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
HUB_PATTERNS = ("*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.tiktoken")
REQUIRED = ((CONFIG_FILENAME,), ("*.safetensors",), ("tokenizer.json", "tokenizer.model", "vocab.json"))
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
ATTENTIONS = ("auto", "sdpa", "eager", "sdpa_fp32")
SPECIAL_TOKENS = {
    "im_start": "<|im_start|>",
    "im_end": "<|im_end|>",
    "audio_pad": "<|audio_pad|>",
    "text_pad": "<|text_pad|>",
}


class MossCheckpointError(ModelSourceError):
    """The MOSS-TTS-Realtime checkpoint is missing, unreadable or does not fit its config."""


@dataclass
class LoadedMoss:
    """The model ready to run, with what the prompt builder and the engine need."""

    model: MossTTSRealtime  # eval mode, on device
    tokenizer: Any  # the transformers tokenizer shipped with the checkpoint
    ids: SpecialIds
    device: torch.device
    dtype: torch.dtype
    max_positions: int  # the backbone window (rows)
    attention: str = "sdpa"  # sdpa | eager | sdpa_fp32
    precision: Precision | None = None  # why ``dtype`` (None: chosen by the caller)


def choose_precision(
    name: str,
    device: torch.device,
    *,
    flags: Iterable[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Precision:
    """Resolve ``MOSS_LM_DTYPE`` (``auto`` or a dtype) for ``device``; ``flags`` and ``env`` (default: this
    CPU's ISA flags, the process environment) feed the codec's bf16 rule (see the module docstring)."""
    if name != "auto" and name not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}: use auto, {', '.join(DTYPES)}")
    explicit = f"MOSS_LM_DTYPE={name} (explicit)"
    if device.type != "cpu":
        if name == "auto":
            return Precision("bfloat16", f"auto: {device.type}, bfloat16 (the released weights' dtype)")
        return Precision(name, explicit)
    fast, why = cpu_bf16_matmul(cpu_flags() if flags is None else flags, env)
    if name == "auto":
        if fast:
            return Precision(
                "bfloat16",
                f"auto: CPU with bf16 matrix instructions ({why}); bf16 within the precision tool's limits",
            )
        return Precision("float32", f"auto: CPU without fast bf16 ({why}), float32")
    if name == "float32" or fast:
        return Precision(name, explicit)
    warning = f"; WARNING: this CPU has {why}, expect it to be many times slower than float32"
    return Precision(name, explicit + warning, slow=True)


def choose_dtype(name: str, device: torch.device) -> torch.dtype:
    """The torch dtype ``choose_precision`` picks for ``name`` on ``device``."""
    return DTYPES[choose_precision(name, device).dtype]


def choose_attention(name: str, device: torch.device) -> str:
    """``"auto"``: sdpa everywhere (see the module docstring for cpu); else the named one, checked."""
    if name not in ATTENTIONS:
        raise ValueError(f"unknown attention {name!r}: use one of {', '.join(ATTENTIONS)}")
    return "sdpa" if name == "auto" else name


def materialize(model: torch.nn.Module, device: torch.device) -> None:
    """Allocate the ``meta`` model's storage on ``device`` (uninitialised; filled by the loader)."""
    model.to_empty(device=device)


def _weight_files(directory: Path) -> list[Path]:
    index = directory / SAFETENSORS_INDEX
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        files = [directory / name for name in sorted(set(weight_map.values()))]
        for file in files:
            if not file.is_file():
                raise MossCheckpointError(
                    f"weight shard {file.name} listed in {SAFETENSORS_INDEX} is missing"
                )
        return files
    single = directory / SAFETENSORS_FILE
    if single.is_file():
        return [single]
    raise MossCheckpointError(f"no {SAFETENSORS_FILE} or {SAFETENSORS_INDEX} in {directory}")


def _checkpoint_shapes(files: list[Path]) -> dict[str, tuple[int, ...]]:
    from safetensors import safe_open

    shapes: dict[str, tuple[int, ...]] = {}
    for file in files:
        with safe_open(str(file), framework="pt", device="cpu") as handle:
            for key in handle.keys():  # noqa: SIM118 (safe_open is not a dict)
                shapes[key] = tuple(handle.get_slice(key).get_shape())
    return shapes


def _tensors(files: list[Path], keys: set[str]) -> Iterator[tuple[str, torch.Tensor]]:
    from safetensors import safe_open

    for file in files:
        with safe_open(str(file), framework="pt", device="cpu") as handle:
            for key in handle.keys():  # noqa: SIM118
                if key in keys:
                    yield key, handle.get_tensor(key)


def layout_problems(expected: dict[str, tuple[int, ...]], found: dict[str, tuple[int, ...]]) -> list[str]:
    """Missing, unexpected and mis-shaped keys, each kind listed (a few names each)."""
    problems = []
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    shapes = sorted(k for k in set(expected) & set(found) if expected[k] != found[k])
    for label, keys in (("missing", missing), ("unexpected", unexpected)):
        if keys:
            problems.append(
                f"{len(keys)} {label} keys ({', '.join(keys[:4])}{', ...' if len(keys) > 4 else ''})"
            )
    if shapes:
        k = shapes[0]
        problems.append(
            f"{len(shapes)} mis-shaped keys ({k}: {found[k]} in the file, {expected[k]} expected)"
        )
    return problems


def special_ids(tokenizer: Any, config: MossLMConfig) -> SpecialIds:
    """The special text ids, looked up by string; the pad id from the tokenizer, else the config."""
    found: dict[str, int] = {}
    for field, token in SPECIAL_TOKENS.items():
        token_id = tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == tokenizer.unk_token_id or token_id >= config.vocab_size:
            raise MossCheckpointError(f"the tokenizer has no usable {token} token")
        found[field] = int(token_id)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else config.text_pad_id
    if pad is None:
        raise MossCheckpointError("neither the tokenizer nor language_config names a pad token")
    return SpecialIds(pad=int(pad), **found)


def build_model(
    directory: Path, device: torch.device, dtype: torch.dtype, attention: str
) -> tuple[MossTTSRealtime, MossLMConfig]:
    """The model of ``directory``: layout checked on ``meta``, materialised on ``device``, filled."""
    try:
        config = read_config(directory)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MossCheckpointError(f"bad MOSS-TTS-Realtime config in {directory}: {exc}") from exc
    backbone = attention_implementation(FP32_SDPA if attention == "sdpa_fp32" else attention)
    with torch.device("meta"):
        model = MossTTSRealtime(config, backbone_attention=backbone, local_attention=attention)
    files = _weight_files(directory)
    params = model.state_dict()
    expected = {key: tuple(t.shape) for key, t in params.items()}
    found = _checkpoint_shapes(files)
    expected.update({key: (config.vocab_size, config.hidden_size) for key in UNUSED_KEYS if key in found})
    problems = layout_problems(expected, found)
    if problems:
        raise MossCheckpointError(
            f"MOSS-TTS-Realtime checkpoint in {directory} does not fit its config: " + "; ".join(problems)
        )
    model.to(dtype)
    materialize(model, device)
    params = model.state_dict()
    with torch.no_grad():
        for key, tensor in _tensors(files, set(params)):
            params[key].copy_(tensor)
    model.reset_rotary()
    return model.eval(), config


def load_moss_lm(
    source: str,
    *,
    device: str = "cpu",
    dtype: str = "float32",
    attention: str = "auto",
    revision: str | None = None,
) -> LoadedMoss:
    """Load the model and tokenizer of ``source`` (a directory, or a HF id downloaded at ``revision``
    through ``app.hub``; blocking, run in a thread) in ``dtype`` (``choose_precision``; float32, the same
    frames on any machine, unless told: the server passes MOSS_LM_DTYPE, ``auto`` by default)."""
    from transformers import AutoTokenizer, PretrainedConfig

    directory = hub.resolve(source, HUB_PATTERNS, REQUIRED, revision=revision)
    where = resolve_device(device)
    precision = choose_precision(dtype, where)
    (log.warning if precision.slow else log.info)("MOSS LM precision: %s", precision.reason)
    chosen_dtype = DTYPES[precision.dtype]
    chosen_attention = choose_attention(attention, where)
    model, config = build_model(directory, where, chosen_dtype, chosen_attention)
    try:
        # a bare config: transformers does not know model_type "moss_tts_realtime" (it would warn); the
        # tokenizer class comes from tokenizer_config.json
        tokenizer = AutoTokenizer.from_pretrained(str(directory), config=PretrainedConfig())
    except (OSError, ValueError) as exc:
        raise MossCheckpointError(f"cannot load the tokenizer in {directory}: {exc}") from exc
    return LoadedMoss(
        model=model,
        tokenizer=tokenizer,
        ids=special_ids(tokenizer, config),
        device=where,
        dtype=chosen_dtype,
        max_positions=config.max_positions,
        attention=chosen_attention,
        precision=precision,
    )
