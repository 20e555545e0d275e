"""A third model family for tests, written as a real one is added: this folder (its settings, its family
and its ``env_example`` block) and one registry line (``REGISTERED`` + ``tests.fakes.tone`` in the test)."""

from app.core.family import FamilySpec
from tests.fakes.tone.settings import ToneSettings

SPEC = FamilySpec(
    name="tone",
    settings=ToneSettings,
    family="tests.fakes.tone.family:ToneFamily",
)
