"""Fingerprints are keyed by a key derived from [core] fernet_key and never stored with the journal."""

from __future__ import annotations

import hashlib
import logging

from airflow.providers.common.ai.durable.core import fingerprint as fingerprint_module
from airflow.providers.common.ai.durable.core.fingerprint import canonical_json, fingerprint, why_fingerprints_differ
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage

KEY_A = "o0n0kq3Zk4mFJm0nQ8m2Xv5yq8cGq9m0b1xk3P2m4zU="
KEY_B = "Zk4mFJm0nQ8m2Xv5yq8cGq9m0b1xk3P2m4zUo0n0kq3="


def test_a_short_secret_in_a_request_cannot_be_recovered_from_the_fingerprint_without_the_key(fernet_key):
    fernet_key(KEY_A)
    stored = fingerprint({"arguments": '{"pin": "493817"}'})
    # What an attacker with only the journal would try: every 6-digit PIN through the plain hash.
    plain = {
        hashlib.sha256(canonical_json({"arguments": f'{{"pin": "{pin:06d}"}}'}).encode()).hexdigest()
        for pin in range(493_000, 494_000)
    }
    assert stored is not None and stored.startswith("hmac-sha256:")
    assert stored.rpartition(":")[2] not in plain
    assert KEY_A not in stored


def test_the_same_request_gets_the_same_fingerprint_under_one_key_and_another_under_another(fernet_key):
    fernet_key(KEY_A)
    under_a = fingerprint({"input": "hello"})
    assert fingerprint({"input": "hello"}) == under_a
    fernet_key(f"{KEY_A},{KEY_B}")  # KEY_A, the first, is the current key (Airflow puts a new key first)
    assert fingerprint({"input": "hello"}) == under_a
    fernet_key(KEY_B)
    assert fingerprint({"input": "hello"}) != under_a


def test_without_a_fernet_key_fingerprints_are_plain_and_a_warning_says_why(fernet_key, caplog):
    fernet_key("")
    # The warning comes once a process, with the keys derived: an earlier test may have derived them.
    fingerprint_module._derived_keys.cache_clear()
    with caplog.at_level(logging.WARNING):
        plain = fingerprint({"input": "hello"})
    assert plain == "sha256:" + hashlib.sha256(canonical_json({"input": "hello"}).encode()).hexdigest()
    assert "fernet_key is not set" in caplog.text


def test_a_journal_recorded_under_another_key_runs_live_and_the_log_names_the_key(fernet_key, caplog):
    storage = InMemoryStorage()
    fernet_key(KEY_A)
    with DurableJournal(storage).run() as run:
        run.claim("model", "gpt", fingerprint(["hello"])).record("answer")
    fernet_key(KEY_B)
    with caplog.at_level(logging.WARNING), DurableJournal(storage).run() as run:
        step = run.claim("model", "gpt", fingerprint(["hello"]))
    assert not step.replayed
    assert "fingerprinted with another key" in caplog.text and "fernet_key must be the same" in caplog.text


def test_a_lone_surrogate_in_a_request_is_fingerprinted_instead_of_crashing():
    assert fingerprint({"output": "\ud800"}) != fingerprint({"output": "\ud801"})


def test_the_reason_names_the_key_only_when_the_keys_differ():
    assert why_fingerprints_differ("hmac-sha256:aaaa:1", "hmac-sha256:aaaa:2") == (
        "it asks something other than the recorded call"
    )
    assert "another key" in why_fingerprints_differ("sha256:1", "hmac-sha256:aaaa:2")
