"""
A number with its noun, as the texts users read say it: ``1 request``, ``2 requests``.
"""

from __future__ import annotations


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``number`` and ``noun``, the noun plural (``plural``, else the noun and ``s``) unless the number is 1."""
    return f"{number} {noun}" if number == 1 else f"{number} {plural or noun + 's'}"
