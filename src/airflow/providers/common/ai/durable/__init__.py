"""
Durable execution of agent tasks: a journal per task instance that a retry replays.

``core/`` is the engine-neutral journal, ``airflow/`` binds it to Airflow, ``openai_agents`` adapts
the OpenAI Agents SDK; see docs/layout.rst. Importing this package runs nothing: the journal core
is given its host (``core/host.py``) by whoever builds a journal.
"""
