"""The collector's counter core, pure: gNMI notifications -> samples (general decoder, and the layout reader
for repeating notifications), counter deltas with reset/wrap rules, CounterBatch assembly and wire bytes; the
compiled loops (``native.pyx``) are checked against their numpy twins."""
