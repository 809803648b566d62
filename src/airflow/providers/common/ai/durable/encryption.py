"""The import path kept for this module: its code now lives in ``durable/core/encryption.py``."""

from __future__ import annotations

from airflow.providers.common.ai.durable.core.encryption import (
    ENCRYPTED_PREFIX,
    EncryptedStorage,
    UndecryptableTextError,
    decrypt_text,
    encrypt_text,
    fernet,
    fernet_keys,
)

__all__ = [
    "ENCRYPTED_PREFIX",
    "EncryptedStorage",
    "UndecryptableTextError",
    "decrypt_text",
    "encrypt_text",
    "fernet",
    "fernet_keys",
]
