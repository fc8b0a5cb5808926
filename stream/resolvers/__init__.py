"""Flow -> path resolvers: the contract, the registry and each resolver (``hash``, ``infer``)."""
