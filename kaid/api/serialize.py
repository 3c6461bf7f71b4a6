"""YAML for kai's outputs: plain data, with kai's string and integer enums (``kaid.model.vocabulary``) written as
the values they stand for, so that ``-o yaml`` reads as ``-o json`` does."""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_multi_representer(StrEnum, lambda dumper, value: dumper.represent_str(str(value)))
_Dumper.add_multi_representer(IntEnum, lambda dumper, value: dumper.represent_int(int(value)))


def to_yaml(data: Any) -> str:
    """``data`` as YAML, keys in their order."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False)
