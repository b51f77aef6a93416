"""WorkflowContext against a stub of the task routes: what it sends and how it
uses what the server answers (no server)."""

from __future__ import annotations

import unittest
from datetime import timedelta
from typing import Any

from flowd import Client, NonDeterminism, StepFailed, Task, Timeout
from flowd.errors import ConflictError
from flowd.workflow import Cancelled, RunOutcome, WorkflowContext, go_duration, run_workflow


class StubClient(Client):
    def __init__(self, answers: dict[str, dict[str, Any]] | None = None, conflict: bool = False):
        super().__init__("http://127.0.0.1:1")
        self.answers = answers or {}
        self.conflict = conflict
        self.sent: list[tuple[str, Any]] = []

    def checkpoint_step(self, task_id: str, lease: str, name: str, attempts: int,
                        output: Any = None, error: str | None = None) -> dict[str, Any]:
        self.sent.append(("step " + name, error if error is not None else output))
        if self.conflict:
            raise ConflictError(409, "Conflict", "lease lost")
        entry = {"status": "FAILED", "error": error} if error is not None else {"status": "COMPLETED", "output": output}
        return self.answers.get(name, {**entry, "kind": "step", "attempts": attempts})

    def suspend_task(self, task_id: str, lease: str, waits: dict[str, dict[str, Any]]) -> None:
        self.sent.append(("suspend", waits))

    def set_variable(self, task_id: str, lease: str, key: str, value: Any) -> None:
        self.sent.append(("set " + key, value))


def task(journal: dict[str, Any] | None = None) -> Task:
    return Task(id="t1", lease="l1", lease_until="", workflow_id="wf-1", step="flowd:run/1", handler="h",
                attempt=1, input={"n": 1}, idempotency_key="", kind="workflow", journal=journal or {})


class WorkflowUnitTest(unittest.TestCase):
    def test_the_recorded_entry_the_server_answers_wins(self) -> None:
        c = StubClient({"a": {"status": "COMPLETED", "output": "first", "kind": "step"}})
        ctx = WorkflowContext(c, task())
        self.assertEqual(ctx.step("a", lambda: "second"), "first")
        self.assertEqual(c.sent, [("step a", "second")])

    def test_names_are_numbered_and_recorded_steps_do_not_run(self) -> None:
        c = StubClient()
        ctx = WorkflowContext(c, task({"x": {"status": "COMPLETED", "output": 1, "kind": "step", "seq": 1}}))
        ran: list[str] = []
        self.assertEqual(ctx.step("x", lambda: ran.append("x")), 1)
        self.assertEqual(ctx.step("x", lambda: 2), 2)
        self.assertEqual(ctx.step("x", lambda: 3), 3)
        self.assertEqual(ran, [])
        self.assertEqual([s[0] for s in c.sent], ["step x#2", "step x#3"])

    def test_a_recorded_failure_raises_step_failed(self) -> None:
        ctx = WorkflowContext(StubClient(), task({"x": {"status": "FAILED", "error": "nope", "attempts": 3}}))
        with self.assertRaises(StepFailed) as cm:
            ctx.step("x", lambda: 1)
        self.assertEqual((cm.exception.step, cm.exception.message, cm.exception.attempts), ("x", "nope", 3))

    def test_waits_suspend_with_what_they_wait_for(self) -> None:
        for call, want in [
            (lambda ctx: ctx.sleep("s", 1.5), {"s": {"sleep": "1500ms"}}),
            (lambda ctx: ctx.sleep("s", timedelta(minutes=2)), {"s": {"sleep": "120s"}}),
            (lambda ctx: ctx.wait_for_event("e", "paid", key="o-1", timeout=60), {"e": {"event": "paid", "key": "o-1", "timeout": "60s"}}),
            (lambda ctx: ctx.wait_for_event("e", "paid"), {"e": {"event": "paid"}}),
            (lambda ctx: ctx.child("c", "invoice", {"a": 1}), {"c": {"child": {"definition": "invoice", "input": {"a": 1}}}}),
        ]:
            c = StubClient()
            out = run_workflow(lambda ctx, _: call(ctx), c, task(), lambda f: f())
            self.assertEqual(out, RunOutcome(dropped="suspended"))
            self.assertEqual(c.sent, [("suspend", want)])

    def test_finished_waits_return_their_outcome(self) -> None:
        ctx = WorkflowContext(StubClient(), task({
            "e": {"status": "COMPLETED", "output": {"amount": 1}, "kind": "event"},
            "t": {"status": "FAILED", "error": {"type": "timeout", "message": "no event"}, "kind": "event"},
            "c": {"status": "FAILED", "error": "child failed", "kind": "child"},
            "s": {"status": "COMPLETED", "output": None, "kind": "sleep"},
            "w": {"status": "WAITING", "kind": "sleep"},
        }))
        self.assertEqual(ctx.wait_for_event("e", "paid"), {"amount": 1})
        with self.assertRaises(Timeout):
            ctx.wait_for_event("t", "paid")
        with self.assertRaises(StepFailed):
            ctx.child("c", "d")
        self.assertIsNone(ctx.sleep("s", 1))

    def test_another_kind_under_a_recorded_name_is_non_determinism_even_if_caught(self) -> None:
        def fn(ctx: WorkflowContext, _: Any) -> Any:
            try:
                ctx.sleep("x", 1)
            except NonDeterminism:
                return "swallowed"
        out = run_workflow(fn, StubClient(), task({"x": {"status": "COMPLETED", "kind": "step"}}), lambda f: f())
        self.assertFalse(out.ok)
        self.assertFalse(out.retryable)
        self.assertIn("recorded as a step", out.error)

    def test_a_lost_lease_drops_the_run(self) -> None:
        def fn(ctx: WorkflowContext, _: Any) -> Any:
            try:
                ctx.step("a", lambda: 1)
            except Cancelled:
                pass
            return "carried on"
        out = run_workflow(fn, StubClient(conflict=True), task(), lambda f: f())
        self.assertTrue(out.dropped)

    def test_errors_out_of_the_function(self) -> None:
        def raises(e: Exception) -> Any:
            def fn(ctx: WorkflowContext, _: Any) -> Any:
                raise e
            return fn
        self.assertTrue(run_workflow(raises(RuntimeError("x")), StubClient(), task(), lambda f: f()).retryable)
        self.assertFalse(run_workflow(raises(StepFailed("a", "m", 1)), StubClient(), task(), lambda f: f()).retryable)
        bad_output = run_workflow(lambda ctx, _: object(), StubClient(), task(), lambda f: f())
        self.assertFalse(bad_output.retryable)

    def test_go_duration(self) -> None:
        self.assertEqual([go_duration(x) for x in (0, 1, 0.25, 90, timedelta(hours=1))],
                         ["0s", "1s", "250ms", "90s", "3600s"])


if __name__ == "__main__":
    unittest.main()
