"""The ``infer`` resolver: places flows by fitting their rates to measured link counters.

Imports run one way: ``resolver`` -> ``group`` -> ``solver`` -> ``config``."""
