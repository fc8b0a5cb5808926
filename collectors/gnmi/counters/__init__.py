"""The collector's counter core, pure: gNMI notifications -> samples (general decoder, and the layout reader
for repeating notifications), counter deltas with reset/wrap rules (one rule in production: ``column_deltas``),
CounterBatch assembly and wire bytes; the compiled loops (``native.pyx``) are checked against their numpy twins,
and both against the tests' per-counter delta oracle."""
