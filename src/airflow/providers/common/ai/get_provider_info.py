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
                },
            }
        },
    }
