"""Load the NeuCodec decoder or encoder from a local directory or a Hugging Face repo in the official layout.

A source directory holds ``model.safetensors`` or ``pytorch_model.bin`` (the official
``neuphonic/neucodec`` ships the latter, with the encoder and its 600M-parameter semantic model in
the same file) and optionally ``neucodec_config.json`` / ``neucodec_encoder_config.json`` for
non-official sizes. Each loader reads only its own tensors: ``load_decoder`` never reads or builds
the encoder (``semantic_model.*``, ``CodecEnc.*``, ``fc_prior.*``, ... are ignored), and
``load_encoder`` skips the decoder and the checkpoint tensors the encode path never uses (w2v-bert
layers after hidden state 16, its training-only ``masked_spec_embed``). Both check the layout strictly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import torch

from app.codec.state_dicts import layout_problems
from app.families.neucodec.codec.config import CONFIG_FILENAME, read_config
from app.families.neucodec.codec.decoder import NeuCodecDecoder
from app.families.neucodec.codec.encoder import NeuCodecEncoder
from app.families.neucodec.codec.encoder_config import (
    ENCODER_CONFIG_FILENAME,
    NeuCodecEncoderConfig,
    read_encoder_config,
)
from app.hub import REPO_ID_RE, download
from app.observability.startup_errors import ModelSourceError

SAFETENSORS_FILE = "model.safetensors"
PICKLE_FILE = "pytorch_model.bin"
HUB_FILES = (SAFETENSORS_FILE, PICKLE_FILE, CONFIG_FILENAME)
ENCODER_HUB_FILES = (*HUB_FILES, ENCODER_CONFIG_FILENAME)
DECODER_PREFIXES = (
    "fc_post_a.",
    "generator.quantizer.project_in.",
    "generator.quantizer.project_out.",
    "generator.backbone.",
    "generator.head.",
)
ENCODER_PREFIXES = (
    "semantic_model.",
    "SemanticEncoder_module.",
    "CodecEnc.",
    "fc_prior.",
    "generator.quantizer.project_in.",
)
_SEMANTIC_LAYER_RE = re.compile(r"^semantic_model\.encoder\.layers\.(\d+)\.")


class CheckpointError(ModelSourceError):
    """The checkpoint is missing, unreadable or does not match the decoder's layout."""


def is_decoder_key(key: str) -> bool:
    """True for checkpoint keys that belong to the decode path."""
    return key.startswith(DECODER_PREFIXES)


def is_encoder_key(key: str) -> bool:
    """True for checkpoint keys that belong to the encode path (used or not)."""
    return key.startswith(ENCODER_PREFIXES)


def is_unused_encoder_key(key: str, config: NeuCodecEncoderConfig) -> bool:
    """True for encoder keys the encode path never reads: later w2v-bert layers, ``masked_spec_embed``."""
    if key == "semantic_model.masked_spec_embed":
        return True
    layer = _SEMANTIC_LAYER_RE.match(key)
    return layer is not None and int(layer.group(1)) >= config.semantic_hidden_state


def _resolve_source(source: str, files: tuple[str, ...]) -> Path:
    """A local directory as is; a Hugging Face repo id downloaded (only ``files``)."""
    path = Path(source).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise CheckpointError(f"codec source {source!r} is a file; pass the directory that holds it")
    if REPO_ID_RE.fullmatch(source):
        return download(source, files)
    raise CheckpointError(f"codec source {source!r} is neither a directory nor a Hugging Face repo id")


def _read_state(directory: Path, keep: Callable[[str], bool]) -> dict[str, torch.Tensor]:
    """Tensors of the checkpoint in ``directory`` whose key passes ``keep`` (safetensors first), on cpu."""
    safetensors_path = directory / SAFETENSORS_FILE
    if safetensors_path.is_file():
        from safetensors import safe_open

        with safe_open(str(safetensors_path), framework="pt", device="cpu") as handle:
            return {key: handle.get_tensor(key) for key in handle.keys() if keep(key)}  # noqa: SIM118
    pickle_path = directory / PICKLE_FILE
    if not pickle_path.is_file():
        raise CheckpointError(f"no {SAFETENSORS_FILE} or {PICKLE_FILE} in {directory}")
    state = torch.load(pickle_path, map_location="cpu", weights_only=True, mmap=True)
    if not isinstance(state, dict):
        raise CheckpointError(f"{pickle_path} does not hold a state dict (got {type(state).__name__})")
    return {key: value for key, value in state.items() if keep(key)}


def _check_layout(model: torch.nn.Module, state: dict[str, torch.Tensor], directory: Path, part: str) -> None:
    """Raise CheckpointError naming missing, unexpected or mis-shaped keys of ``part`` (decoder/encoder)."""
    problems = layout_problems(model, state, part)
    if problems:
        raise CheckpointError(
            f"NeuCodec checkpoint in {directory} does not fit the {part}: " + "; ".join(problems)
        )


def load_decoder(source: str, device: torch.device | str = "cpu") -> NeuCodecDecoder:
    """Build the decoder for ``source`` (directory or HF repo id), load its weights strictly, eval mode."""
    directory = _resolve_source(source, HUB_FILES)
    config = read_config(directory)
    state = _read_state(directory, is_decoder_key)
    with torch.device(device):
        model = NeuCodecDecoder(config)
    _check_layout(model, state, directory, "decoder")
    model.load_state_dict(state, strict=True)
    return model.eval()


def load_encoder(source: str, device: torch.device | str = "cpu") -> NeuCodecEncoder:
    """Build the encoder for ``source`` (directory or HF repo id), load its weights strictly, eval mode.

    The model is laid out on the meta device (no init cost for 400M parameters), checked against the
    checkpoint, then materialised on ``device`` and filled: every tensor it has is a checkpoint tensor.
    """
    directory = _resolve_source(source, ENCODER_HUB_FILES)
    codec_config = read_config(directory)
    config = read_encoder_config(directory)
    state = _read_state(directory, lambda key: is_encoder_key(key) and not is_unused_encoder_key(key, config))
    if not any(key.startswith("CodecEnc.") for key in state):
        raise CheckpointError(f"the NeuCodec checkpoint in {directory} has no encoder weights (decode only)")
    try:
        with torch.device("meta"):
            model = NeuCodecEncoder(codec_config, config)
    except ValueError as exc:
        raise CheckpointError(f"encoder config in {directory} does not fit its codec config: {exc}") from exc
    _check_layout(model, state, directory, "encoder")
    model.to_empty(device=device)
    model.load_state_dict(state, strict=True)
    return model.eval()
