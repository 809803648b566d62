"""The import path kept for this module: its code now lives in ``durable/core/fingerprint.py``."""

from __future__ import annotations

from airflow.providers.common.ai.durable.core.fingerprint import (
    Fingerprint,
    FingerprintHasher,
    UnrenderableValueError,
    canonical_json,
    fingerprint,
    fingerprint_key,
    fingerprint_of_json,
    masked_json,
    recorded_form,
    why_fingerprints_differ,
)

__all__ = [
    "Fingerprint",
    "FingerprintHasher",
    "UnrenderableValueError",
    "canonical_json",
    "fingerprint",
    "fingerprint_key",
    "fingerprint_of_json",
    "masked_json",
    "recorded_form",
    "why_fingerprints_differ",
]
