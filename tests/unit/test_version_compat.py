"""What differs between the Airflow lines, as version_compat handles it."""

from __future__ import annotations

import pytest

from airflow.providers.common.ai.version_compat import (
    AIRFLOW_V_3_3_PLUS,
    AIRFLOW_V_3_4_PLUS,
    task_state_store_rows_of,
)


@pytest.mark.skipif(not AIRFLOW_V_3_3_PLUS, reason="the task state store is Airflow 3.3+")
def test_the_rows_of_a_task_instance_are_picked_by_the_column_its_airflow_keys_the_store_by():
    from sqlalchemy import select

    from airflow.models.task_state_store import TaskStateStoreModel

    where = select(TaskStateStoreModel.key).where(*task_state_store_rows_of(TaskStateStoreModel, 3))
    sql = str(where.compile(compile_kwargs={"literal_binds": True}))

    if AIRFLOW_V_3_4_PLUS:
        # 3.4 renamed map_index to region_index; a task instance outside a dynamic region has the
        # zero region id (a row of another region with the same index is not its own).
        assert "task_state_store.region_index = 3" in sql
        assert "task_state_store.region_id = " in sql
        assert "map_index" not in sql
    else:
        assert "task_state_store.map_index = 3" in sql
        assert "region" not in sql
