"""The processor's three per-window stages (links, flows, fabric): pure state machines over decoded records."""
