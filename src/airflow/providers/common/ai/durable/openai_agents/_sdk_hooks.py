"""
The SDK's functions a durable run replaces, put in place only while one runs: importing the
adapter changes nothing in ``agents``. :class:`SDKHooks` installs a set of replacements when the
first durable run of the process starts and puts back what they replaced when the last one ends,
so that nested runs, runs in several threads and runs that raise share one installation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Replacement:
    """``owner.attribute`` replaced by ``value`` (a module's function or a class's attribute)."""

    owner: Any
    attribute: str
    value: Any


class SDKHooks:
    """
    Replacements of SDK functions, installed by :meth:`installed` for as long as any caller is
    inside it. ``replacements`` builds them when they are installed, from what is in place then.
    """

    def __init__(self, replacements: Callable[[], list[Replacement]]) -> None:
        self.replacements = replacements
        self._lock = threading.Lock()
        self._users = 0
        # Each replacement installed and the value it replaced, as read from its owner.
        self._replaced: list[tuple[Replacement, Any]] = []

    @property
    def is_installed(self) -> bool:
        return self._users > 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """The replacements in place inside; what they replaced put back when the last user leaves."""
        with self._lock:
            if self._users == 0:
                self._install()
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._restore()

    def _install(self) -> None:
        replaced = []
        try:
            for replacement in self.replacements():
                # getattr_static: a class's classmethod is put back as the classmethod, not bound.
                original = inspect.getattr_static(replacement.owner, replacement.attribute)
                setattr(replacement.owner, replacement.attribute, replacement.value)
                replaced.append((replacement, original))
        except BaseException:
            self._replaced = replaced
            self._restore()
            raise
        self._replaced = replaced

    def _restore(self) -> None:
        for replacement, original in reversed(self._replaced):
            current = inspect.getattr_static(replacement.owner, replacement.attribute)
            if current is not replacement.value:
                # Someone replaced it again after us: putting ours back would undo their change.
                log.warning(
                    "Durable: %s.%s was replaced during a durable run by something else; left as it is",
                    getattr(replacement.owner, "__name__", replacement.owner),
                    replacement.attribute,
                )
                continue
            setattr(replacement.owner, replacement.attribute, original)
        self._replaced = []
