"""A secret with characters each encoding changes, and the forms it can take in a value: for tests of masking."""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

import pytest

SECRET = 'c0nn "pass\\word"/ü+%'

#: Parametrizes a test with ``encode``: one way a secret can appear inside a stored value.
ENCODINGS = pytest.mark.parametrize(
    "encode",
    [
        lambda secret: json.dumps(secret),
        lambda secret: json.dumps(json.dumps({"password": secret})),
        lambda secret: json.dumps(secret, ensure_ascii=True),
        lambda secret: quote(secret),
        lambda secret: quote_plus(secret),
        lambda secret: quote(json.dumps({"password": secret})),
    ],
    ids=["json", "json-in-json", "json-ascii", "url", "url-plus", "json-in-url"],
)
