"""Command-line tools (python -m app.tools.<name>)."""
