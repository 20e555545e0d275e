"""Shared types with no imports from the rest of the app: errors, stats, voices, device, routes."""
