"""The processor's runtime: Faust wiring (``app``), worker start-up, input decoding, offset commits."""
