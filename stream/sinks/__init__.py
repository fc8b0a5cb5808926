"""Where the processor's points go: a typed ``Sink`` contract, one module per sink, a registry."""
