"""
Fingerprints of what a journaled call asked: a keyed hash (HMAC-SHA256) of one canonical JSON
rendering, with every secret Airflow's masker knows replaced.

A plain hash of a request can be brute-forced offline when the request held a short secret (a
PIN): the key, derived from Airflow's ``[core] fernet_key``, is never stored with the journal and
is the same on every worker that shares Airflow's configuration. Without a Fernet key the hash is
plain SHA-256, with a warning; either way it is taken over the masked rendering, so no secret the
masker knows enters a stored hash. A fingerprint names its key (``hmac-sha256:<key id>:<digest>``),
so a journal recorded under another key is told apart from a changed request. Hashed under the
current (first) key, it also knows its forms under the later keys of ``[core] fernet_key``, so that
after a rotation (a new key put in front of the old one) a recorded call still matches
(:func:`recorded_form`).
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import dataclasses
import datetime
import enum
import functools
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import PurePath
from typing import Any

from airflow.providers.common.ai.durable.core.encryption import fernet_keys
from airflow.providers.common.ai.durable.core.host import current_host
from airflow.providers.common.ai.durable.core.masking import masked, renders_without_a_secret

log = logging.getLogger(__name__)


class UnrenderableValueError(TypeError):
    """A value has no rendering that is the same in every process."""


def _canonical(value: Any) -> Any:
    # Called by json.dumps for anything it cannot render itself; what it returns is rendered again.
    if isinstance(value, (set, frozenset)):
        return sorted(canonical_json(item) for item in value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    if isinstance(value, (Decimal, uuid.UUID, PurePath)):
        return str(value)
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Field by field, not dataclasses.asdict: asdict deep-copies every nested value first.
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    raise UnrenderableValueError(f"{type(value).__qualname__} has no canonical JSON rendering")


# One encoder for every rendering: json.dumps with options builds a new one on each call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_canonical)


def canonical_json(value: Any) -> str:
    """
    Render ``value`` as JSON that is identical in every process for equal values.

    Keys are sorted, sets are ordered by their items' renderings, tuples render as lists, and
    enums, dates, bytes, pydantic models and dataclasses by their values. Anything else (a function,
    an object whose only rendering is its address) raises :class:`UnrenderableValueError`.
    """
    try:
        return _CANONICAL.encode(value)
    except UnrenderableValueError:
        raise
    except (TypeError, ValueError, RecursionError) as error:
        # json raises TypeError for mixed key types under sort_keys and ValueError for cycles.
        raise UnrenderableValueError(str(error)) from error


_KEY_DERIVATION = b"airflow.providers.common.ai durable fingerprint key\0"


def fingerprint_key() -> tuple[tuple[bytes, str], ...] | None:
    """
    The keys fingerprints are hashed with and their public ids, derived from the keys of
    ``[core] fernet_key`` (the current host's): the first (the current) key hashes, the later ones
    match journals recorded before a rotation. ``None``, with a warning, when there is no Fernet key.
    Inside :func:`fingerprint_key_pinned`, the keys read as it started.
    """
    return _keying().keys


class _Keying:
    """Keys as fingerprints hash with them: their ids, and a hash of each not started yet (copied for each fingerprint)."""

    __slots__ = ("key_ids", "keys", "unstarted")

    def __init__(self, keys: tuple[tuple[bytes, str], ...] | None) -> None:
        self.keys = keys
        self.key_ids = tuple(key_id for _, key_id in keys) if keys is not None else None
        # A copy of a keyed HMAC is cheaper than keying a new one.
        self.unstarted = (
            tuple(hmac.new(secret, digestmod=hashlib.sha256) for secret, _ in keys) if keys else (hashlib.sha256(),)
        )


@functools.lru_cache(maxsize=8)
def _keying_of(keys: tuple[tuple[bytes, str], ...] | None) -> _Keying:
    return _Keying(keys)


def _keying() -> _Keying:
    pinned = _pinned_keying.get()
    return pinned if pinned is not None else _keying_of(_derived_keys(tuple(fernet_keys())))


#: The keys an agent run hashes with, read once as it starts (None outside a run).
_pinned_keying: contextvars.ContextVar[_Keying | None] = contextvars.ContextVar(
    "durable_fingerprint_keys", default=None
)


@contextlib.contextmanager
def fingerprint_key_pinned() -> Iterator[None]:
    """
    Fingerprints taken inside use the keys read as it starts: the setting is read once an agent
    run, not once a call (a read of Airflow's configuration costs more than the hash it keys).
    """
    token = _pinned_keying.set(_keying())
    try:
        yield
    finally:
        _pinned_keying.reset(token)


@functools.lru_cache(maxsize=8)
def _derived_keys(fernet_key: tuple[str, ...]) -> tuple[tuple[bytes, str], ...] | None:
    # By the keys themselves: a key setting that changes (a test, a replay under another
    # deployment's key) derives its own, with nothing to reset.
    if not fernet_key:
        wording = current_host().wording
        log.warning(
            "Durable: %s is not set, so fingerprints are plain SHA-256 and a short secret in a request could be "
            "guessed from the journal; set a Fernet key %s",
            wording.key_setting,
            wording.where_keys_are_set,
        )
        return None
    keys = (hashlib.sha256(_KEY_DERIVATION + key.encode()).digest() for key in fernet_key)
    return tuple((key, hmac.new(key, b"key id", hashlib.sha256).hexdigest()[:8]) for key in keys)


class Fingerprint(str):
    """
    A fingerprint under the current key that also knows its ``forms`` under every key of
    ``[core] fernet_key``, current first: after a rotation puts a new key in front of the old one,
    a call recorded under the old key still matches (see :func:`recorded_form`).
    """

    forms: tuple[str, ...]


def masked_json(rendered: str) -> str:
    """
    A rendering of :func:`canonical_json` with every secret the masker knows replaced in its
    strings and keys: ``rendered`` itself when it holds none.
    """
    value, changed = masked(json.loads(rendered))
    return canonical_json(value) if changed else rendered


def rendered_and_masked(value: Any) -> tuple[str, str]:
    """
    ``value``'s :func:`canonical_json` and that rendering masked (:func:`masked_json`); where
    ``value`` is made of JSON's own types, its own strings are checked for secrets rather than its
    rendering parsed back (they are the same strings), and the masked rendering is the rendering
    itself (``is``) when it holds none.
    """
    rendered = canonical_json(value)
    return rendered, rendered if renders_without_a_secret(value) else masked_json(rendered)


class FingerprintHasher:
    """The fingerprint of a masked rendering given in pieces, as :func:`fingerprint` hashes it whole."""

    __slots__ = ("_hashes", "_key_ids")

    def __init__(self) -> None:
        keying = _keying()
        self._key_ids = keying.key_ids
        self._hashes = [hashed.copy() for hashed in keying.unstarted]

    def update(self, text: str) -> None:
        # surrogatepass: a lone surrogate (which Python strings may hold) hashes instead of failing.
        data = text.encode("utf-8", "surrogatepass")
        for hashed in self._hashes:
            hashed.update(data)

    def copy(self) -> FingerprintHasher:
        """A hasher that goes on from what this one has hashed so far."""
        copied = FingerprintHasher.__new__(FingerprintHasher)
        copied._key_ids = self._key_ids
        copied._hashes = [hashed.copy() for hashed in self._hashes]
        return copied

    def fingerprint(self) -> str:
        """The fingerprint of what was hashed: under every key of ``[core] fernet_key`` (see :class:`Fingerprint`)."""
        return _fingerprint_of(self._key_ids, self._hashes)


def _fingerprint_of(key_ids: tuple[str, ...] | None, hashes: list[Any]) -> str:
    if key_ids is None:
        return f"sha256:{hashes[0].hexdigest()}"
    forms = tuple(f"hmac-sha256:{key_id}:{hashed.hexdigest()}" for key_id, hashed in zip(key_ids, hashes, strict=True))
    result = Fingerprint(forms[0])
    result.forms = forms
    return result


def fingerprint_of_json(rendered: str) -> str:
    """The fingerprint of a masked rendering (see :func:`masked_json`)."""
    # What FingerprintHasher hashes in one piece, without one: a call hashes several parts this way.
    keying = _keying()
    data = rendered.encode("utf-8", "surrogatepass")
    if keying.key_ids is None:
        return f"sha256:{hashlib.sha256(data).hexdigest()}"
    hashes = [hashed.copy() for hashed in keying.unstarted]
    for hashed in hashes:
        hashed.update(data)
    return _fingerprint_of(keying.key_ids, hashes)


def fingerprint(value: Any, *, what: str = "a call") -> str | None:
    """
    Return the keyed digest of ``value``'s canonical JSON, masked, or ``None`` with a warning.

    A call without a fingerprint cannot be matched against a recorded one, so it runs live; it
    never fails the task.
    """
    try:
        rendered = rendered_and_masked(value)[1]
    except UnrenderableValueError as error:
        log.warning("Durable: cannot fingerprint %s, so it runs live: %s", what, error)
        return None
    return fingerprint_of_json(rendered)


def stored_fingerprint(fingerprint: str | None) -> str | None:
    """What an entry stores of ``fingerprint`` (format 8): its key's name and the first 128 bits of its digest."""
    if fingerprint is None:
        return None
    key, colon, digest = fingerprint.rpartition(":")
    return f"{key}{colon}{stored_digest(digest)}"


def stored_digest(digest: str) -> str:
    """What an entry stores of a SHA-256 hex digest (format 8): its first 128 bits."""
    return digest[:32] if len(digest) == 64 else digest


def recorded_digest_is(recorded: Any, digest: str) -> bool:
    """Whether ``recorded`` is ``digest`` as an entry of any format stores it (whole, or as :func:`stored_digest`)."""
    return recorded == digest or recorded == stored_digest(digest)


def recorded_form(recorded: Any, current: str | None) -> str | None:
    """
    The form of ``current`` that ``recorded`` stores (whole, or as :func:`stored_fingerprint`):
    under the current key or under a later key of ``[core] fernet_key`` (one the current key
    replaced); ``None`` when ``recorded`` fingerprints another call.

    A step that matches under an older key takes that form as its own, so that the steps after it
    follow the chain that was recorded.
    """
    if current is None or not isinstance(recorded, str):
        return None
    for form in getattr(current, "forms", (current,)):
        if recorded == form or recorded == stored_fingerprint(form):
            return form
    return None


def _key_of(fingerprint: Any) -> str | None:
    return fingerprint.rpartition(":")[0] if isinstance(fingerprint, str) else None


def why_fingerprints_differ(recorded: Any, current: str) -> str:
    """Why a recorded fingerprint is not ``current``: another key, or another request."""
    if _key_of(recorded) != _key_of(current):
        return (
            f"it was fingerprinted with another key ({_key_of(recorded)!r}, this worker uses "
            f"{_key_of(current)!r}): {current_host().wording.key_setting} must be the same on every worker, "
            "and after a rotation the old key stays after the new one until no journal uses it"
        )
    return "it asks something other than the recorded call"
