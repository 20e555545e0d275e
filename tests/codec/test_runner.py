"""DecodeRunner's host buffer pool: buffers are reused across batches, and the pool stays bounded."""

from __future__ import annotations

from app.codec.runner import HostBufferPool
from app.core.device import DeviceOps


def test_a_returned_buffer_is_reused_for_the_same_shape() -> None:
    pool = HostBufferPool(DeviceOps("cpu"))
    first = pool.take((2, 64))
    pool.give(first)
    assert pool.take((2, 64)) is first
    assert pool.take((2, 64)) is not first  # none free any more: a new one
    assert pool.take((4, 64)).shape == (4, 64)


def test_the_pool_keeps_few_buffers_per_shape_and_few_shapes() -> None:
    pool = HostBufferPool(DeviceOps("cpu"), shapes=2, per_shape=1)
    a, b = pool.take((1, 8)), pool.take((1, 8))
    pool.give(a)
    pool.give(b)  # over per_shape: dropped
    assert pool.take((1, 8)) is a and pool.take((1, 8)) is not b
    c, d, e = pool.take((1, 9)), pool.take((1, 10)), pool.take((1, 11))
    for buffer in (c, d, e):
        pool.give(buffer)  # three shapes, room for two: (1, 9) goes, least recently used
    assert pool.take((1, 9)) is not c
    assert pool.take((1, 10)) is d and pool.take((1, 11)) is e
