"""PrefillGroup: which rows prefill together, and the chunks, masks and positions it hands the model;
GrowingLayer: appends in place, the same model outputs."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path

import torch

from app.families.neucodec.lm.loading import load_lm
from app.lm.padded_cache import GROW_MIN, GrowingLayer, PrefillGroup, new_cache


@dataclass(eq=False)
class Row:
    size: int  # prompt tokens
    length: int = 0

    def prompt(self) -> torch.Tensor:
        return torch.arange(1, self.size + 1)[None]  # [1, P]: ids 1..P


def form(sizes: list[int], most: int = 8) -> tuple[list[list[int]], deque[Row]]:
    """The groups formed one after another from rows of ``sizes`` (their sizes)."""
    admitted = deque(Row(size) for size in sizes)
    groups = []
    while admitted:
        group: PrefillGroup[Row] = PrefillGroup()
        group.form(admitted, most, Row.prompt)
        groups.append([row.size for row in group.rows])
    return groups, admitted


def test_groups_take_rows_in_arrival_order_up_to_the_most() -> None:
    assert form([5, 6, 7, 8, 9], most=2)[0] == [[5, 6], [7, 8], [9]]
    assert form([5, 6, 7, 8, 9], most=1)[0] == [[5], [6], [7], [8], [9]]


def test_a_prompt_that_would_make_padding_most_of_the_group_starts_the_next() -> None:
    # [40, 45] + 200: 600 columns for 285 real ones, so the 200 starts the next group (FIFO kept);
    # [200, 50, 60]: 600 for 310 (within half); + 40: 800 for 350, so the 40 waits for the next
    assert form([40, 45, 200, 50, 60, 40])[0] == [[40, 45], [200, 50, 60], [40]]
    assert form([100, 60, 55, 70])[0] == [[100, 60, 55, 70]]  # padding within half: one group


def test_chunks_mask_the_left_padding_and_give_each_row_its_own_positions() -> None:
    admitted = deque([Row(3), Row(5)])
    group: PrefillGroup[Row] = PrefillGroup()
    group.form(admitted, 8, Row.prompt)
    assert group.pads == [2, 0]
    assert group.inputs is not None
    assert group.inputs.tolist() == [[1, 1, 1, 2, 3], [1, 2, 3, 4, 5]]
    chunks = []
    while True:
        inputs, mask, positions = group.next_chunk(4)  # 2 columns per chunk for 2 rows
        assert mask is not None and positions is not None
        chunks.append((inputs.tolist(), mask.tolist(), positions.tolist()))
        if group.advance(cache=None, columns=int(inputs.shape[1])):
            break
    assert chunks[0] == ([[1, 1], [1, 2]], [[0, 0], [1, 1]], [[0, 0], [0, 1]])
    assert chunks[1] == ([[1, 2], [3, 4]], [[0, 0, 1, 1], [1, 1, 1, 1]], [[0, 1], [2, 3]])
    assert chunks[2] == ([[3], [5]], [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], [[2], [4]])
    assert [row.length for row in group.rows] == [3, 5]


def test_rows_of_one_length_take_the_plain_causal_path() -> None:
    group: PrefillGroup[Row] = PrefillGroup()
    group.form(deque([Row(4), Row(4)]), 8, Row.prompt)
    inputs, mask, positions = group.next_chunk(100)
    assert inputs.shape == (2, 4) and mask is None and positions is None


def test_frames_of_several_columns_are_padded_with_the_first_frame() -> None:
    prompts = {3: torch.arange(6).reshape(1, 3, 2), 1: torch.tensor([[[7, 8]]])}
    group: PrefillGroup[Row] = PrefillGroup()
    group.form(deque([Row(3), Row(1)]), 8, lambda row: prompts[row.size])
    assert group.inputs is not None
    assert group.inputs[1].tolist() == [[7, 8], [7, 8], [7, 8]]


def test_dropping_a_row_mid_prefill_keeps_the_others_in_order() -> None:
    group: PrefillGroup[Row] = PrefillGroup()
    rows = [Row(3), Row(5), Row(4)]
    group.form(deque(rows), 8, Row.prompt)
    group.drop([rows[1]])
    assert group.rows == [rows[0], rows[2]] and group.pads == [2, 1]
    assert group.inputs is not None and group.inputs.shape == (2, 5)
    group.drop(rows)
    assert (group.rows, group.inputs, group.pads, group.width) == ([], None, [], 0)


# --- GrowingLayer -----------------------------------------------------------------------------------------


def test_a_growing_layer_appends_in_place_within_a_quarter_of_spare_columns() -> None:
    layer = GrowingLayer()
    steps = [torch.randn(2, 3, 1, 4) for _ in range(300)]
    buffers = set()
    for step in steps:
        keys, values = layer.update(step, -step)
        buffers.add(layer._k.data_ptr())
        assert layer._k.shape[2] <= keys.shape[2] * 1.25 + GROW_MIN + 1
    assert torch.equal(keys, torch.cat(steps, dim=2)) and torch.equal(values, -keys)
    assert layer.get_seq_length() == 300 and len(buffers) <= 8  # a few growths, not a copy per step


def test_assigned_keys_become_the_buffer_and_updates_go_on_after_them() -> None:
    layer = GrowingLayer()
    layer.update(torch.arange(5.0).view(1, 1, 5, 1), torch.arange(5.0).view(1, 1, 5, 1))
    layer.keys = layer.keys[:, :, 2:]  # trimmed one after the other, as keep_rows does
    layer.values = layer.values[:, :, 2:]
    assert layer.keys.flatten().tolist() == layer.values.flatten().tolist() == [2.0, 3.0, 4.0]
    layer.keys, layer.values = torch.zeros(2, 1, 3, 2), torch.zeros(2, 1, 3, 2)  # as append_rows does
    keys, values = layer.update(torch.full((2, 1, 1, 2), 7.0), torch.full((2, 1, 1, 2), 8.0))
    assert keys.shape == (2, 1, 4, 2) and keys[:, :, 3].eq(7).all() and values[:, :, :3].eq(0).all()


def test_a_model_runs_the_same_on_growing_layers(tiny_lm_dir: Path) -> None:
    from transformers.cache_utils import DynamicCache

    lm = load_lm(str(tiny_lm_dir), torch.device("cpu"), torch.float32)
    ids = lm.tokenizer("<|im_start|>jenny: Hello there!<|speech_start|>", return_tensors="pt").input_ids
    runs = []
    for cache in (DynamicCache(), new_cache(lm.model.config)):
        with torch.inference_mode():
            logits, cache = lm.logits(input_ids=ids, past_key_values=cache)
            seen = [logits]
            for code in (3, 99, 12345, 7, 65535) * 20:  # past the first buffer's spare columns
                logits, cache = lm.logits(input_ids=lm.allowed_ids[code].view(1, 1), past_key_values=cache)
                seen.append(logits)
        runs.append(torch.cat(seen))
    assert isinstance(cache.layers[0], GrowingLayer)
    assert torch.allclose(runs[0], runs[1], atol=1e-5)
