"""``@task.agent``: the decorated function writes the prompt, the agent's answer is the task's result."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.common.compat.sdk import (
    SET_DURING_EXECUTION,
    DecoratedOperator,
    TaskDecorator,
    context_merge,
    determine_kwargs,
    task_decorator_factory,
)

from airflow.providers.common.ai.operators.agent import AgentOperator

if TYPE_CHECKING:
    from airflow.sdk import Context


class _AgentDecoratedOperator(DecoratedOperator, AgentOperator):
    """An AgentOperator whose prompt is the return value of the decorated function."""

    template_fields: Sequence[str] = (*DecoratedOperator.template_fields, *AgentOperator.template_fields)
    template_fields_renderers: ClassVar[dict[str, str]] = {
        **DecoratedOperator.template_fields_renderers,
        **AgentOperator.template_fields_renderers,
    }
    custom_operator_name: str = "@task.agent"

    def __init__(
        self,
        *,
        python_callable: Callable,
        op_args: Collection[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs=op_kwargs,
            prompt=SET_DURING_EXECUTION,
            **kwargs,
        )

    def execute(self, context: Context) -> Any:
        context_merge(context, self.op_kwargs)
        kwargs = determine_kwargs(self.python_callable, self.op_args, context)
        self.prompt = self.python_callable(*self.op_args, **kwargs)
        return super().execute(context)


def agent_task(python_callable: Callable | None = None, **kwargs: Any) -> TaskDecorator:
    """
    Make a function that returns the prompt into an :class:`AgentOperator` task, which takes the
    operator's arguments: ``@task.agent(agent=triage_agent, durable=True, retries=2)``. The agent is
    an OpenAI Agents SDK agent or a Pydantic AI agent (with the extra ``[pydantic-ai]``).

    The function runs in the worker at the start of each try; its arguments may be XComs of
    upstream tasks, as with ``@task``.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        decorated_operator_class=_AgentDecoratedOperator,
        **kwargs,
    )
