"""Durable execution of agent tasks: a journal per task instance that a retry replays."""
