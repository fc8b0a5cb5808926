"""Topology discovery over gNMI: targets, Get of LLDP / interfaces / AFT (``fetch``), the pure parsing
(``facts``) and building (``build``) of a topology file."""
