import re, pathlib, sys
C = "airflow.providers.common.compat.sdk"
subs = [
 # generic top-level airflow.sdk names -> common.compat.sdk
 (r"from airflow\.sdk import (?!exceptions)", f"from {C} import "),
 (r"from airflow\.sdk\.bases\.decorator import", f"from {C} import"),
 (r"from airflow\.sdk\.definitions\.context import context_merge", f"from {C} import context_merge"),
 (r"from airflow\.sdk\.bases\.notifier import BaseNotifier", f"from {C} import BaseNotifier"),
 (r"from airflow\.sdk\._shared\.secrets_masker import mask_secret", f"from {C} import mask_secret"),
 (r"from airflow\.sdk\.exceptions import (AirflowTaskTimeout|AirflowSkipException)", rf"from {C} import \1"),
 (r"from airflow\.sdk\.exceptions import AirflowTaskTerminated",
  "try:\n    from airflow.sdk.exceptions import AirflowTaskTerminated\nexcept ImportError:\n    from airflow.exceptions import AirflowTaskTerminated"),
 (r"from airflow\.sdk\.io import has_fs", f"from {C} import io as _io\n    has_fs = _io.has_fs"),
 (r"from airflow\.sdk\.timezone import utcnow", f"from {C} import timezone as _tz\n    utcnow = _tz.utcnow"),
 (r"    from airflow\.sdk import exceptions\n", "    try:\n        from airflow.sdk import exceptions\n    except ImportError:\n        from airflow import exceptions\n"),
 (r"from airflow\.sdk\.definitions\._internal\.mixins import ResolveMixin",
  "try:\n    from airflow.sdk.definitions._internal.mixins import ResolveMixin\nexcept ImportError:  # Airflow 2\n    from airflow.utils.mixins import ResolveMixin"),
]
for p in list(pathlib.Path("src").rglob("*.py")) + list(pathlib.Path("tests").rglob("*.py")) + list(pathlib.Path("example_dags").rglob("*.py")):
    s = o = p.read_text()
    for a, b in subs:
        s = re.sub(a, b, s)
    if s != o:
        p.write_text(s); print("ported", p)
