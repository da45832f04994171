"""Drives a rule's coroutine with answers for its Gets, as Pants' run_rule_with_mocks does, but an
answer that is an exception is raised inside the rule, where the engine raises a failed Get: the
preflight's checks catch those to report every problem, and that is what their tests assert."""

from __future__ import annotations

from typing import Any, Callable, List, Tuple

from pants.engine.rules import Get

# (output type, input) of each Get the rule made, in order: what it asked for.
Asked = List[Tuple[type, Any]]


def drive(coroutine: Any, answer: Callable[[type, Any], Any]) -> Tuple[Any, Asked]:
    """Runs `coroutine` to its result; `answer(output_type, input)` answers each Get with a value, or
    an exception to raise in the rule (a MultiGet is its Gets in order). Returns the result and what was asked."""
    asked: Asked = []

    def one(get: Get) -> Any:
        asked.append((get.output_type, get.inputs[0] if len(get.inputs) == 1 else get.inputs))
        return answer(get.output_type, asked[-1][1])

    sent: Any = None
    while True:
        try:
            if isinstance(sent, BaseException):
                yielded = coroutine.throw(sent)
            else:
                yielded = coroutine.send(sent)
        except StopIteration as e:
            return e.value, asked
        if isinstance(yielded, Get):
            sent = one(yielded)
        else:  # a MultiGet: all of them, or the first failure as the engine raises it
            answers = [one(g) for g in yielded]
            sent = next((a for a in answers if isinstance(a, BaseException)), answers)
