"""The public API is pinned: the OpenAPI document equals the committed snapshot.

A change to a route, a field, a range, an example or a description shows up here as a diff. When the
change is intended, regenerate the snapshot (the command is in the assertion message) and review it.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.main import create_app
from tests.conftest import make_settings

SNAPSHOT = Path(__file__).with_name("openapi_snapshot.json")
REGENERATE = (
    '.venv/bin/python -c "import json; from app.main import create_app; from tests.conftest import '
    'make_settings; print(json.dumps(create_app(make_settings()).openapi(), indent=1, sort_keys=True))" '
    "> tests/api/openapi_snapshot.json"
)


def test_openapi_document_matches_the_snapshot() -> None:
    document = json.loads(json.dumps(create_app(make_settings()).openapi()))
    assert document == json.loads(SNAPSHOT.read_text()), f"the public API changed; if intended: {REGENERATE}"
