"""
No secret reaches the store in any form (R-50): not in a stored field, not inside a stored hash.

Fingerprints and part digests are taken over the masked form of what a call asks. The tests
compute what the code before R-50 stored (the same hashes over the unmasked form) and check that
none of it is in the store, with and without ``[core] fernet_key``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections import Counter
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import pytest
from agents import Agent, FunctionTool, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from airflow.providers.common.compat.sdk import mask_secret
from durable_backends import FakeTaskStateStore, make_storage, records_in_store
from secret_forms import ENCODINGS, SECRET
from tries import Task

from airflow.providers.common.ai.durable.core import masking
from airflow.providers.common.ai.durable.core.fingerprint import canonical_json, fingerprint, fingerprint_key
from airflow.providers.common.ai.durable.core.journal import DurableJournal
from airflow.providers.common.ai.durable.core.storage import InMemoryStorage

KEY = "o0n0kq3Zk4mFJm0nQ8m2Xv5yq8cGq9m0b1xk3P2m4zU="
WITH_AND_WITHOUT_A_KEY = pytest.mark.parametrize("key", [KEY, ""], ids=["fernet-key", "no-fernet-key"])


def hash_texts(stored: list[str]) -> set[str]:
    """Every hex digest in the stored texts: fingerprints, chain digests, part digests (12 or more hex digits)."""
    return {digest for text in stored for digest in re.findall(r"(?<![0-9a-f])[0-9a-f]{12,64}(?![0-9a-f])", text)}


def texts_of(storage: FakeTaskStateStore) -> list[str]:
    """Every record the task state store's segments hold (superseded ones too): entries and marks, the index."""
    return [text for _, text in records_in_store(storage)]


def forms_of(secret: str) -> set[str]:
    """The forms a secret would sit in: plain, JSON-escaped (once and twice), URL-encoded."""
    escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
    return {secret, escaped, json.dumps(escaped)[1:-1], json.dumps(secret)[1:-1], quote(secret), quote_plus(secret)}


class Lookup:
    """A task whose model asks one tool with ``arguments`` and fails after it; the retry replays."""

    def __init__(self, arguments: dict) -> None:
        self.arguments = arguments
        self.runs = Counter()
        self.accessor = FakeTaskStateStore()
        self.task = Task(make_storage("task-state-store", None, self.accessor))

        async def lookup(context: object, arguments: str) -> str:
            self.runs["lookup"] += 1
            return "found"

        # Any arguments, as the model writes them: the SDK checks none against a schema.
        self.tool = FunctionTool(
            name="lookup",
            description="Looks something up.",
            params_json_schema={"type": "object", "additionalProperties": True},
            on_invoke_tool=lookup,
            strict_json_schema=False,
        )

    def agent(self, *steps) -> Agent:
        return Agent(name="a", model=ScriptedModel(list(steps)), tools=[self.tool])

    def answers(self) -> list[list]:
        """The model asks the tool with ``arguments``, then once more with others."""
        return [
            [function_call("lookup", self.arguments, call_id="c1")],
            [function_call("lookup", {"other": 2}, call_id="c2")],
        ]

    def first_try(self) -> list[str]:
        """Try 1 dies after both tool calls; what the store holds then (the run's snapshot included)."""
        self.task.failing_attempt(self.agent(*self.answers(), RuntimeError("model outage")), RuntimeError)
        return texts_of(self.accessor)


def hashes_stored_without_masking(monkeypatch, arguments: dict) -> set[str]:
    """The hashes the code before R-50 stored for ``arguments``: the same run with nothing masked in hashes."""
    with monkeypatch.context() as unmasked:
        unmasked.setattr(masking, "_redact", lambda text: text)
        return hash_texts(Lookup(arguments).first_try())


@WITH_AND_WITHOUT_A_KEY
def test_a_secret_the_model_puts_into_a_tool_call_as_an_argument_name_reaches_no_entry_and_no_hash(
    key, fernet_key, monkeypatch
):
    # Prompt injection: the model writes the secret where the tool's argument names go.
    fernet_key(key)
    secret = f"hunter2-secret-value-{bool(key)}"
    old = hashes_stored_without_masking(monkeypatch, {secret: 1})
    old_with_another_name = hashes_stored_without_masking(monkeypatch, {f"another-name-{bool(key)}": 1})
    depends_on_the_secret = old - old_with_another_name
    mask_secret(secret)

    lookup = Lookup({secret: 1})
    stored = lookup.first_try()

    everything = "\n".join(stored)
    for form in forms_of(secret):
        assert form not in everything, form
    assert {key for key, _ in records_in_store(lookup.accessor)} == {"1.1", "1.2", "1.3", "1.4"}
    entry = json.loads(lookup.task.storage.read("1.2"))
    assert entry["parts"]["arguments"] == {"***": entry["parts"]["arguments"]["***"]}
    # The tool call's fingerprint, every chain digest after it, the next model call's fingerprint
    # and the digest of its input item that holds the call all held the name.
    assert len(depends_on_the_secret) >= 5
    assert not depends_on_the_secret & hash_texts(stored)

    # A retry masks the same way: the calls after the masked answer replay, the answer is asked again.
    # The script holds only the answers asked live: the masked one, and the final one.
    second = lookup.agent(lookup.answers()[0], [assistant_message("done")])
    assert lookup.task.attempt(second).final_output == "done"
    assert lookup.runs == {"lookup": 2}
    assert len(second.model.calls) == 2
    assert lookup.task.replayed == {"tool": 2, "model": 1}


@ENCODINGS
@WITH_AND_WITHOUT_A_KEY
def test_a_secret_escaped_or_encoded_in_an_argument_name_or_value_reaches_no_part_and_no_hash(
    encode, key, fernet_key, monkeypatch
):
    fernet_key(key)
    secret = f"{SECRET}{bool(key)}"
    arguments = {f"name {encode(secret)}": f"value {encode(secret)}"}
    old = hashes_stored_without_masking(monkeypatch, arguments)
    old_without_it = hashes_stored_without_masking(monkeypatch, {"name": "value"})
    mask_secret(secret)

    lookup = Lookup(arguments)
    stored = lookup.first_try()

    everything = "\n".join(stored)
    for form in forms_of(secret) | {encode(secret), json.dumps(encode(secret))[1:-1]}:
        assert form not in everything, form
    assert (old - old_without_it) and not (old - old_without_it) & hash_texts(stored)
    # What the code before R-50 stored as the value's part digest, computed here: not in the store.
    value = next(iter(arguments.values()))
    assert old_part_digest(value) in old
    assert old_part_digest(value) not in hash_texts(stored)


def old_part_digest(value: str) -> str:
    """A part digest as the code before R-50 took it: over the unmasked value."""
    rendered = canonical_json(value).encode()
    keys = fingerprint_key()
    digest = hmac.new(keys[0][0], rendered, hashlib.sha256) if keys else hashlib.sha256(rendered)
    return digest.hexdigest()[:12]


def hash_after(prefix: bytes) -> Callable[[bytes], bytes]:
    """
    The digest of ``prefix`` + a text as fingerprints took it, with ``prefix`` hashed once: HMAC-SHA256
    under the fingerprint key (RFC 2104, its inner and outer hashes precomputed) or SHA-256.
    """
    keys = fingerprint_key()
    if keys is None:
        plain = hashlib.sha256(prefix)

        def digest(rest: bytes) -> bytes:
            hashed = plain.copy()
            hashed.update(rest)
            return hashed.digest()

        return digest
    key = keys[0][0].ljust(64, b"\0")
    inner, outer = (hashlib.sha256(bytes(byte ^ pad for byte in key)) for pad in (0x36, 0x5C))
    inner.update(prefix)

    def keyed(rest: bytes) -> bytes:
        hashed, result = inner.copy(), outer.copy()
        hashed.update(rest)
        result.update(hashed.digest())
        return result.digest()

    return keyed


@WITH_AND_WITHOUT_A_KEY
def test_a_masked_pin_in_a_tool_call_cannot_be_brute_forced_from_its_fingerprint_or_digests(
    key, fernet_key, monkeypatch
):
    # Without a key the fingerprint was a plain SHA-256 of the real call: all 10^6 PINs through the
    # same hash found the PIN. Computed here for every candidate, the old forms are not in the store.
    fernet_key(key)
    pin = "493817" if key else "582036"  # the masker of this process keeps what it learnt
    arguments = json.dumps({"pin": "@"}, separators=(",", ":"))
    before, after = canonical_json({"name": "lookup", "arguments": arguments, "call_id": "c1"}).encode().split(b"@")
    call_digest, value_digest = hash_after(before), hash_after(b'"')
    # The tool call's fingerprint and its argument's part digest, as the old code took them.
    old = hashes_stored_without_masking(monkeypatch, {"pin": pin})
    # An entry stores a fingerprint's first 128 bits (format 8).
    assert {call_digest(pin.encode() + after).hex()[:32], value_digest(pin.encode() + b'"').hex()[:12]} <= old
    mask_secret(pin)
    stored = hash_texts(Lookup({"pin": pin}).first_try())

    fingerprints = {bytes.fromhex(digest) for digest in stored if len(digest) == 32}
    part_digests = {bytes.fromhex(digest) for digest in stored if len(digest) == 12}
    found = [
        number
        for number in range(1_000_000)
        if call_digest(b"%06d" % number + after)[:16] in fingerprints
        or value_digest(b'%06d"' % number)[:6] in part_digests
    ]
    assert found == []


def test_a_fingerprint_over_masked_secrets_still_tells_apart_calls_that_differ_in_anything_else():
    mask_secret("s3cret-one-7")
    mask_secret("s3cret-two-8")
    call = {"pin": "s3cret-one-7", "note": "a"}
    assert fingerprint(call) == fingerprint(dict(call))
    assert fingerprint(call) != fingerprint({**call, "note": "b"})
    # Two names masked alike keep their own values apart.
    assert fingerprint({"s3cret-one-7": 1, "s3cret-two-8": 2}) != fingerprint({"s3cret-one-7": 3, "s3cret-two-8": 2})
    # The masked form, not the secret, is hashed: two secrets in one place fingerprint alike.
    assert fingerprint({"pin": "s3cret-one-7"}) == fingerprint({"pin": "s3cret-two-8"})


def test_a_call_whose_secret_the_masker_learnt_only_after_it_was_recorded_runs_live(caplog):
    # Its fingerprint was taken over the secret itself, the retry's over the masked form: they
    # differ, and the call runs live (the secret was in the store before the masker knew it).
    runs = Counter()

    @function_tool
    def log_in(password: str) -> str:
        """Logs in."""
        runs[password] += 1
        return "in"

    task = Task()
    answer = [function_call("log_in", {"password": "learnt-later-4711"}, call_id="c1")]
    task.failing_attempt(Agent(name="a", model=ScriptedModel([answer, RuntimeError()]), tools=[log_in]), RuntimeError)
    mask_secret("learnt-later-4711")
    with caplog.at_level(logging.WARNING):
        task.attempt(Agent(name="a", model=ScriptedModel([answer, [assistant_message("ok")]]), tools=[log_in]))
    # The answer that asked for it replays (recorded before the masker knew the secret); the call runs again.
    assert runs == {"learnt-later-4711": 2}
    assert task.replayed == {"model": 1}
    assert "run diverged" in caplog.text


def test_a_step_whose_name_holds_a_secret_is_stored_with_the_name_masked_and_runs_live():
    mask_secret("named-after-a-secret-31")
    storage = InMemoryStorage()
    with DurableJournal(storage).run() as run:
        run.claim("tool", "tool-named-after-a-secret-31", fingerprint("asks")).record("done")
    assert "named-after-a-secret-31" not in json.dumps(storage.entries)
    with DurableJournal(storage).run() as run:
        assert not run.claim("tool", "tool-named-after-a-secret-31", fingerprint("asks")).replayed


@pytest.mark.parametrize("text", ["\ud800 pin-5531-a", "pin-5531-a\udfff", "a \udc80 pin-5531-a \ud800 b"])
def test_a_secret_next_to_a_lone_surrogate_is_masked_on_every_airflow_line(text, caplog):
    # Airflow 2.11's masker gives up on a text it cannot encode as UTF-8, leaving it unmasked.
    mask_secret("pin-5531-a")
    with caplog.at_level(logging.WARNING):
        masked = masking.masked_text(text)
    assert "pin-5531-a" not in masked
    assert masked.count("***") == 1
    assert masked.replace("***", "pin-5531-a") == text
    assert [record.getMessage() for record in caplog.records if record.levelname == "WARNING"] == []
