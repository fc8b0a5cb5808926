"""From symptoms to the culprit: per-window symptoms, a SCOUT-style risk model and incidents (docs/stream.md)."""
