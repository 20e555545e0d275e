"""The fixtures tool writes the tiny MOSS-TTS-Realtime checkpoint beside the others, loadable as is."""

from __future__ import annotations

import json
from pathlib import Path

from app.families.moss.lm.loader import load_moss_lm
from app.tools.fixtures.__main__ import main


def test_the_fixtures_tool_writes_moss_tts(tmp_path: Path) -> None:
    main(["--out", str(tmp_path)])
    directory = tmp_path / "moss_tts"
    raw = json.loads((directory / "config.json").read_text())
    assert raw["model_type"] == "moss_tts_realtime"
    assert raw["language_config"]["hidden_size"] == 32 and raw["local_config"]["num_hidden_layers"] == 4
    loaded = load_moss_lm(str(directory))
    assert loaded.tokenizer("Hello <|im_end|>")["input_ids"][-1] == loaded.ids.im_end
    assert (tmp_path / "moss_codec" / "config.json").is_file()  # the codec is written beside it
