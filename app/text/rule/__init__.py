"""The ``rule`` normalizer mode (the default): sanitize and tidy, optionally Malaysian entities.

``clean`` (sanitize + light cleanup) is the shared first step of every mode.
"""

from app.text.rule.mode import clean, normalize_rule

__all__ = ["clean", "normalize_rule"]
