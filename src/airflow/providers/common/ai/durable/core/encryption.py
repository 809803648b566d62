"""
Journal entries encrypted at rest with Airflow's own Fernet key, ``[core] fernet_key``.

With a key, every entry (and any other text passed through :func:`encrypt_text`) is stored as
``fernet:<token>``. As for Airflow's connections, the key may be a comma-separated list: the
first key encrypts, every key decrypts, so a new key put in front of the old one rotates without
losing a journal. A Fernet token is authenticated: an entry changed in the store does not decrypt.

Without a key, entries are stored as plain JSON, as before this module existed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from airflow.providers.common.ai.durable.core.host import Host, current_host
from airflow.providers.common.ai.durable.core.storage import JournalStorage

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

#: What an encrypted text starts with; a plain entry is a JSON object and starts with "{".
ENCRYPTED_PREFIX = "fernet:"


class UndecryptableTextError(Exception):
    """A stored text cannot be read back with this worker's ``[core] fernet_key``."""


def fernet_keys(host: Host | None = None) -> list[str]:
    """The keys of the host's Fernet key setting (``[core] fernet_key``), current first; empty without one."""
    value = (host or current_host()).fernet_key_setting() or ""
    return [key.strip() for key in value.split(",") if key.strip()]


def fernet(host: Host | None = None) -> MultiFernet | None:
    """
    The Fernet that encrypts with the first key of ``[core] fernet_key`` and decrypts with any,
    built as Airflow builds its own; ``None`` without a key. Refuses a key that is not a Fernet key.
    ``host``: whose keys (by default the current host's).
    """
    from cryptography.fernet import Fernet, MultiFernet

    host = host or current_host()
    keys = fernet_keys(host)
    if not keys:
        return None
    try:
        return MultiFernet([Fernet(key.encode()) for key in keys])
    except (ValueError, TypeError) as error:
        raise host.invalid_key_error(
            f"{host.wording.key_setting} is not a list of Fernet keys ({error}): generate one with "
            'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
        ) from error


def encrypt_text(text: str, host: Host | None = None) -> str:
    """``text`` encrypted with the current key of ``[core] fernet_key``, or ``text`` itself without a key."""
    return _encrypted(fernet(host), text)


def decrypt_text(stored: str, host: Host | None = None) -> str:
    """
    The text :func:`encrypt_text` stored as ``stored``.

    Raises :class:`UndecryptableTextError`, naming the cause, for a text that no key of
    ``[core] fernet_key`` decrypts, an encrypted text on a worker without a key, and a plain text
    on a worker with one (it was written before the key was set, or not by Airflow).
    """
    host = host or current_host()
    return _decrypted(fernet(host), stored, host.wording.key_setting)


def _encrypted(current: MultiFernet | None, text: str) -> str:
    if current is None:
        return text
    # surrogatepass: a lone surrogate (which Python strings may hold) round-trips instead of failing.
    return ENCRYPTED_PREFIX + current.encrypt(text.encode("utf-8", "surrogatepass")).decode("ascii")


def _decrypted(current: MultiFernet | None, stored: str, setting: str) -> str:
    """``stored`` decrypted; ``setting``: the host's name for its key setting, for the messages."""
    from cryptography.fernet import InvalidToken

    encrypted = stored.startswith(ENCRYPTED_PREFIX)
    if current is None:
        if encrypted:
            raise UndecryptableTextError(
                f"it is encrypted and this worker has no {setting}: set the key the other workers use"
            )
        return stored
    if not encrypted:
        raise UndecryptableTextError(
            f"it is stored unencrypted while {setting} is set: it was written before the key was set"
        )
    try:
        return current.decrypt(stored[len(ENCRYPTED_PREFIX) :].encode("ascii")).decode("utf-8", "surrogatepass")
    except (InvalidToken, UnicodeError):
        raise UndecryptableTextError(
            f"no key of {setting} decrypts it: the key it was encrypted with was removed or changed, "
            f"or it was altered in the store; {setting} must be the same on every worker, and after a "
            "rotation the old key stays after the new one until no journal uses it"
        ) from None


class EncryptedStorage(JournalStorage):
    """
    Another storage's entries, encrypted with ``[core] fernet_key`` (stored as they are without a key):
    the keys of ``host``, by default the current host's.

    An entry that cannot be decrypted raises :class:`UndecryptableTextError` from :meth:`read`: the
    journal sets it aside, logs the cause and runs that step live; clean-up still deletes it.
    """

    def __init__(self, storage: JournalStorage, host: Host | None = None) -> None:
        # Read once per try, and now, so that a key that is not a Fernet key fails before any call.
        host = host or current_host()
        self._fernet = fernet(host)
        self._setting = host.wording.key_setting
        self.storage = storage
        self.identity = storage.identity
        self.calls_in_background = storage.calls_in_background
        self.reads_at_once = storage.reads_at_once
        self.whole_journal_at_once = storage.whole_journal_at_once

    def read(self, key: str) -> str | None:
        found = self._decrypted_or_error(self.storage.read(key))
        if isinstance(found, Exception):
            raise found
        return found

    def read_many(self, keys: list[str]) -> list[str | Exception | None]:
        return [self._decrypted_or_error(stored) for stored in self.storage.read_many(keys)]

    def _decrypted_or_error(self, stored: str | Exception | None) -> str | Exception | None:
        if not isinstance(stored, str):
            return stored
        try:
            return _decrypted(self._fernet, stored, self._setting)
        except UndecryptableTextError as error:
            return UndecryptableTextError(f"the entry cannot be decrypted: {error}")

    def write(self, key: str, text: str) -> None:
        self.storage.write(key, _encrypted(self._fernet, text))

    def delete_all(self, keys: Iterable[str]) -> None:
        self.storage.delete_all(keys)

    def seal(self) -> None:
        self.storage.seal()
