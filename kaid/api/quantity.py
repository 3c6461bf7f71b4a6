"""Kubernetes resource quantities ("500m", "1Gi", "64G", "1e3") parsed into exact integers."""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from functools import lru_cache

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9), "T": Decimal(10**12),
            "P": Decimal(10**15), "E": Decimal(10**18)}


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: object) -> Decimal:
    """Return the quantity as an exact Decimal in base units (cores, bytes, devices)."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity (expected a number such as 2, 500m or 16Gi)")
    return _parse_text(value)


@lru_cache(maxsize=4096)  # a cluster's pods repeat the same few request strings ("100m", "256Mi", "1")
def _parse_text(value: str) -> Decimal:
    text = value.strip()
    if not text:
        raise QuantityError(f"{value!r} is not a quantity (expected a number such as 2, 500m or 16Gi)")
    for suffix, mult in _BINARY.items():
        if text.endswith(suffix):
            return _number(text[: -len(suffix)], value) * mult
    if text[-1] in "numkMGTPE":
        return _number(text[:-1], value) * _DECIMAL[text[-1]]
    return _number(text, value)


def _number(text: str, original: object) -> Decimal:
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise QuantityError(f"{original!r} is not a quantity (expected a number such as 2, 500m or 16Gi)") from None
    if not number.is_finite():
        raise QuantityError(f"{original!r} is not a finite quantity")
    return number


def to_milli(value: object) -> int:
    """cpu (or GPUs) in thousandths, rounded up the way the kubelet rounds requests."""
    return math.ceil(parse_quantity(value) * 1000)


def to_int(value: object) -> int:
    """memory in bytes, pods or devices; fractions round up."""
    return math.ceil(parse_quantity(value))
