"""What Airflow's ProvidersManager learns about this provider.

Mirrors ``provider.yaml`` at the repository root; ``tests/unit/test_get_provider_info.py``
keeps the two equal.
"""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "apache-airflow-providers-common-ai",
        "name": "Common AI",
        "description": (
            "Durable OpenAI Agents SDK agent tasks: when an agent task is retried, the model and tool\n"
            "calls the failed try completed replay from a journal instead of running again.\n"
        ),
        "versions": ["0.1.0"],
        "integrations": [
            {
                "integration-name": "Common AI",
                "external-doc-url": "https://openai.github.io/openai-agents-python/",
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "Common AI",
                "python-modules": ["airflow.providers.common.ai.operators.agent"],
            }
        ],
        "task-decorators": [{"class-name": "airflow.providers.common.ai.decorators.agent.agent_task", "name": "agent"}],
        "hooks": [
            {
                "integration-name": "Common AI",
                "python-modules": ["airflow.providers.common.ai.hooks.openai"],
            }
        ],
        "connection-types": [
            {
                "hook-class-name": "airflow.providers.common.ai.hooks.openai.OpenAIAgentsHook",
                "connection-type": "openai",
                "hook-name": "OpenAI",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port", "login"],
                    "relabeling": {"host": "Base URL", "password": "API key"},
                    "placeholders": {
                        "host": "empty for api.openai.com, else an OpenAI-compatible endpoint: http://vllm.internal:8000/v1",
                        "extra": '{"use_responses": false, "openai_client_kwargs": {"timeout": 60}}',
                    },
                },
            }
        ],
        "plugins": [
            {
                "name": "common_ai_durable",
                "plugin-class": "airflow.providers.common.ai.plugins.durable.DurableJournalPlugin",
            }
        ],
        "config": {
            "common.ai": {
                "description": "Durable execution of agent tasks.\n",
                "options": {
                    "durable_cache_path": {
                        "description": (
                            "Where durable agent journals live on Airflow before 3.3: an ObjectStorage URI\n"
                            "(file:///... for one machine; s3://CONN_ID@bucket/path or gs://CONN_ID@bucket/path for\n"
                            "workers that share nothing, CONN_ID naming the Airflow connection to use).\n"
                            "Empty: durable execution is refused on Airflow before 3.3.\n"
                            "On Airflow 3.3+ the task state store is used and this option is ignored.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "file:///tmp/airflow_durable_cache",
                        "default": "",
                    },
                    "try_summary_retention_days": {
                        "description": (
                            "How many days the summary of each try of a durable task (what replayed, ran live,\n"
                            "could not be recorded, tokens used and saved, divergences) stays readable on the\n"
                            "task instance's Agent journal page, also after the task succeeded and its journal\n"
                            "was deleted. Kept beside the journal: in the task state store with this retention\n"
                            "on Airflow 3.3+, else under durable_cache_path. 0 keeps no summaries.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "integer",
                        "example": "30",
                        "default": "7",
                    },
                    "model_prices": {
                        "description": (
                            "Prices of models in US dollars per million tokens, by model name, as JSON: for a\n"
                            "private deployment, a negotiated rate, or a model the maintained price table\n"
                            "(genai-prices) does not know. A model named here takes this price over the table's.\n"
                            '"cached_input" (optional) is the price of input tokens read from the provider\'s\n'
                            "prompt cache. A model with no price has an unknown cost: it is named, never guessed.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": '{"my-llama": {"input": 0.2, "output": 0.6, "cached_input": 0.05}}',
                        "default": "",
                    },
                    "approval_wait_in_worker": {
                        "description": (
                            "Seconds a durable task that has just made an approval request keeps its worker before\n"
                            "it defers, on Airflow 3.3+, so that an answer given meanwhile is handed back by the\n"
                            "approval trigger instead of meeting Airflow's race between a deferral and a resume\n"
                            "that follows it within seconds. 0 defers at once. Unused before 3.3 and in dag.test().\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "60",
                        "default": "20",
                    },
                    "approval_resume_delay": {
                        "description": (
                            "Seconds from a durable task's deferral for an answer to the earliest moment its\n"
                            "approval trigger hands the answer back, and a resumed try acts on it: longer than a\n"
                            "busy worker takes to end and be reported to the scheduler.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "30",
                        "default": "15",
                    },
                    "keep_journals": {
                        "description": (
                            "Whether the journal of a durable task instance that succeeded is kept (archived, as\n"
                            "stored: encrypted where the journal is) instead of only deleted, when its runs do not\n"
                            "say (keep_journal= of AgentOperator, run_durably and run_durably_sync). A kept journal\n"
                            "can be exported (airflow common-ai journal export), replayed offline in a test and\n"
                            "forked into a task instance.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "boolean",
                        "example": "True",
                        "default": "False",
                    },
                    "kept_journal_path": {
                        "description": (
                            "Where kept journals go: an ObjectStorage URI (file:///..., s3://CONN_ID@bucket/path).\n"
                            "Empty: beside the journal, as a key of the task state store on Airflow 3.3+, else under\n"
                            "durable_cache_path.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "s3://aws_default@my-bucket/kept-journals",
                        "default": "",
                    },
                    "kept_journal_retention_days": {
                        "description": (
                            "How many days a kept journal stays: the task state store drops it then; one kept as an\n"
                            "object is ignored then and deleted by airflow common-ai journal clean-up.\n"
                        ),
                        "version_added": "0.1.0",
                        "type": "integer",
                        "example": "90",
                        "default": "30",
                    },
                },
            }
        },
        "cli": ["airflow.providers.common.ai.cli.journal.get_cli_commands"],
    }
