"""The compatibility contract: API groups, label and annotation keys, units, CRD and config models."""
