"""Code workflows (Worker.workflow) against a real flowd serve."""

from __future__ import annotations

import threading
import time
import unittest
import uuid
from datetime import datetime, timedelta
from typing import Any, Callable

import flowd
from flowd import (Cancelled, NonDeterminism, PermanentError, RetryPolicy, StepFailed, Timeout, Worker,
                   WorkflowContext)
from flowd_server import FlowdServer, wait_for

server: FlowdServer


def setUpModule() -> None:
    global server
    server = FlowdServer()


def tearDownModule() -> None:
    server.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


NO_RETRY = RetryPolicy(max_attempts=1)


def poll_until(what: str, cond: Callable[[], Any], timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


class WorkflowTest(unittest.TestCase):
    """Each test serves workflows of names of its own."""

    def setUp(self) -> None:
        self.client = server.client
        self.worker = Worker(self.client, wait_seconds=1, concurrency=4, shutdown_grace=5)

    def serve(self) -> None:
        self.worker.start()
        self.addCleanup(self.worker.stop)

    def causes(self, wf_id: str) -> list[str]:
        return [v["cause"] for v in self.client.history(wf_id)]

    def test_steps_are_recorded_once_and_replayed(self) -> None:
        name = unique("replay")
        calls: dict[str, int] = {}
        seen: list[tuple[Any, ...]] = []

        def count(key: str, out: Any) -> Callable[[], Any]:
            def fn() -> Any:
                calls[key] = calls.get(key, 0) + 1
                return out
            return fn

        @self.worker.workflow(name)
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            a = ctx.step("a", count("a", {"n": input["n"] + 1}))
            loop = [ctx.step("loop", count(f"loop{i}", i)) for i in range(3)]
            values = (ctx.now(), ctx.random(), ctx.uuid())
            seen.append(values)
            ctx.sleep("nap", timedelta(milliseconds=200))
            b = ctx.step("b", count("b", a["n"] * 10))
            return {"a": a, "b": b, "loop": loop, "keys": flowd.WorkflowContext.__name__}

        self.serve()
        inst = self.client.start_workflow(definition=name, input={"n": 1})
        done = wait_for(self.client, inst.id)
        self.assertEqual(done.status, "COMPLETED", done.state)
        self.assertEqual(done.output["a"], {"n": 2})
        self.assertEqual(done.output["b"], 20)
        self.assertEqual(done.output["loop"], [0, 1, 2])
        self.assertEqual(calls, {"a": 1, "loop0": 1, "loop1": 1, "loop2": 1, "b": 1})
        steps = done.state["steps"]
        for key in ("a", "loop", "loop#2", "loop#3", "flowd:now", "flowd:random", "flowd:uuid", "b"):
            self.assertEqual(steps[key]["status"], "COMPLETED", key)
            self.assertEqual(steps[key]["kind"], "step", key)
        self.assertEqual(steps["nap"]["kind"], "sleep")
        # Two runs: to the sleep, then from it; the second saw the same
        # recorded now / random / uuid.
        self.assertEqual(len(seen), 2)
        self.assertEqual(seen[0], seen[1])
        now, rnd, uid = seen[0]
        self.assertIsInstance(now, datetime)
        self.assertTrue(0 <= rnd < 1)
        self.assertEqual(str(uuid.UUID(uid)), uid)
        causes = self.causes(inst.id)
        self.assertEqual(causes.count('step "a" completed'), 1)
        self.assertEqual(causes.count('step "b" completed'), 1)
        self.assertEqual(sorted(s["seq"] for s in steps.values()), list(range(1, len(steps) + 1)))

    def test_the_definition_is_put_with_timeout_and_retry(self) -> None:
        name = unique("def")
        self.worker.workflow(name, lambda ctx, input: input, timeout=3600,
                             retry=RetryPolicy(max_attempts=5, initial_backoff=0.5))
        self.serve()
        got = self.client.get_definition(name)
        self.assertEqual(got["definition"], {"name": name, "revision": 1, "code": {"handler": name}, "timeout": "1h",
                                             "retry": {"max_attempts": 5, "initial_backoff": "500ms"}})
        # Another worker with the same workflow: no new revision.
        again = Worker(self.client, wait_seconds=1)
        again.workflow(name, lambda ctx, input: input, timeout=3600,
                       retry=RetryPolicy(max_attempts=5, initial_backoff=0.5))
        again.start()
        again.stop()
        self.assertEqual(self.client.get_definition(name)["revision"], 1)
        done = wait_for(self.client, self.client.start_workflow(definition=name, input={"x": [1, "x"]}).id)
        self.assertEqual((done.status, done.output), ("COMPLETED", {"x": [1, "x"]}))

    def test_an_event_published_before_and_after_the_wait(self) -> None:
        name = unique("event")
        gate = threading.Event()

        @self.worker.workflow(name)
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            ctx.step("first", lambda: gate.wait(20))
            ctx.set("stage", "waiting")
            paid = ctx.wait_for_event("paid", "payment", key=ctx.workflow_id)
            ctx.set("stage", "paid")
            return {"paid": paid}

        self.serve()
        # Before: the workflow started, its first step holds it before the wait.
        early = self.client.start_workflow(definition=name, id=unique("early"))
        self.client.publish_event("payment", key=early.id, data={"amount": 1})
        gate.set()
        done = wait_for(self.client, early.id)
        self.assertEqual((done.status, done.output), ("COMPLETED", {"paid": {"amount": 1}}), done.state)
        self.assertEqual(done.state["variables"]["stage"], "paid")

        # After: the wait is recorded WAITING (and ctx.set visible in GET) first.
        late = self.client.start_workflow(definition=name, id=unique("late"))
        waiting = poll_until("the wait", lambda: (lambda i: i if i.state.get("steps", {}).get("paid", {})
                                                  .get("status") == "WAITING" else None)(
            self.client.get_workflow(late.id)))
        self.assertEqual(waiting.status, "RUNNING")
        self.assertEqual(waiting.state["variables"]["stage"], "waiting")
        self.assertEqual(waiting.state["steps"]["paid"]["kind"], "event")
        self.client.publish_event("payment", key=late.id, data={"amount": 2})
        done = wait_for(self.client, late.id)
        self.assertEqual((done.status, done.output), ("COMPLETED", {"paid": {"amount": 2}}))
        self.assertEqual(done.state["variables"]["stage"], "paid")

    def test_search_attributes(self) -> None:
        name = unique("search")

        @self.worker.workflow(name)
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            ctx.search("customer", input["customer"])
            ctx.search("amount", 42)
            ctx.sleep("nap", 0.1)
            ctx.search("stage", "slept")
            try:
                ctx.search("Bad", 1)
            except flowd.FlowdError as e:
                return {"bad": type(e).__name__}
            return {"bad": None}

        self.serve()
        started = self.client.start_workflow(definition=name, input={"customer": "acme"}, search={"tier": 1})
        self.assertEqual(started.search, {"tier": 1})
        done = wait_for(self.client, started.id)
        self.assertEqual((done.status, done.output), ("COMPLETED", {"bad": "BadRequestError"}), done.state)
        self.assertEqual(done.search, {"customer": "acme", "amount": 42, "stage": "slept", "tier": 1})
        # The second run sets customer and amount again: no new version.
        sets = [c for c in self.causes(done.id) if c.startswith("search attribute")]
        self.assertEqual(len(sets), 3, sets)

    def test_an_event_wait_times_out(self) -> None:
        name = unique("timeout")

        @self.worker.workflow(name)
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            try:
                return ctx.wait_for_event("paid", "never-" + name, timeout=0.3)
            except Timeout as e:
                return {"expired": e.step}

        self.serve()
        done = wait_for(self.client, self.client.start_workflow(definition=name).id)
        self.assertEqual((done.status, done.output), ("COMPLETED", {"expired": "paid"}), done.state)
        self.assertEqual(done.state["steps"]["paid"]["status"], "FAILED")

    def test_a_child_workflow(self) -> None:
        parent, child, failing = unique("parent"), unique("child"), unique("failing")

        @self.worker.workflow(child)
        def child_wf(ctx: WorkflowContext, input: Any) -> Any:
            return {"doubled": ctx.step("double", lambda: input["n"] * 2)}

        @self.worker.workflow(failing)
        def failing_wf(ctx: WorkflowContext, input: Any) -> Any:
            raise PermanentError("no luck")

        @self.worker.workflow(parent)
        def parent_wf(ctx: WorkflowContext, input: Any) -> Any:
            out = ctx.child("kid", child, {"n": 21})
            try:
                ctx.child("bad", failing)
            except StepFailed as e:
                return {"child": out, "failed": e.step}
            return {"child": out}

        self.serve()
        inst = self.client.start_workflow(definition=parent)
        done = wait_for(self.client, inst.id)
        self.assertEqual(done.status, "COMPLETED", done.state)
        self.assertEqual(done.output, {"child": {"doubled": 42}, "failed": "bad"})
        self.assertEqual(done.state["steps"]["kid"]["kind"], "child")

    def test_parallel_steps_run_at_once_and_are_recorded_each(self) -> None:
        name = unique("parallel")
        barrier = threading.Barrier(3, timeout=10)
        keys: list[str] = []

        def branch(out: Any) -> Callable[[], Any]:
            def fn() -> Any:
                keys.append(flowd.idempotency_key())
                barrier.wait()  # all three run at once, or this breaks
                return out
            return fn

        @self.worker.workflow(name)
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            outs = ctx.parallel([("p", branch(1)), ("p", branch(2)), ("q", branch("three"), NO_RETRY)])
            ctx.sleep("nap", 0.1)  # a replay: recorded parallel steps do not run again
            return outs

        self.serve()
        inst = self.client.start_workflow(definition=name, id=unique("par"))
        done = wait_for(self.client, inst.id)
        self.assertEqual((done.status, done.output), ("COMPLETED", [1, 2, "three"]), done.state)
        self.assertEqual(sorted(keys), sorted(f"{inst.id}/{k}" for k in ("p", "p#2", "q")))
        for k in ("p", "p#2", "q"):
            self.assertEqual(self.causes(inst.id).count(f'step "{k}" completed'), 1)

    def test_a_diverging_replay_fails_the_workflow_with_non_determinism(self) -> None:
        name = unique("diverge")
        runs: list[int] = []
        caught: list[NonDeterminism] = []

        @self.worker.workflow(name)
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            runs.append(1)
            if len(runs) == 1:
                ctx.step("x", lambda: 1)
            else:
                try:
                    ctx.sleep("x", 1)  # "x" was recorded as a step
                except NonDeterminism as e:
                    caught.append(e)
                    return "swallowed"  # caught or not, the workflow fails
            ctx.sleep("nap", 0.1)
            return "unreachable"

        self.serve()
        done = wait_for(self.client, self.client.start_workflow(definition=name).id)
        self.assertEqual(done.status, "FAILED", done.state)
        self.assertEqual(len(caught), 1)
        self.assertEqual((caught[0].step, caught[0].recorded, caught[0].now), ("x", "step", "sleep"))
        self.assertIn("non-determinism", str(done.state["code"]["error"]))

    def test_a_step_failing_for_good_is_caught_and_compensated(self) -> None:
        name = unique("saga")
        attempts: list[int] = []

        def ship() -> Any:
            attempts.append(1)
            raise RuntimeError("carrier down")

        @self.worker.workflow(name)
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            charge = ctx.step("charge", lambda: "ch-" + flowd.idempotency_key())
            try:
                ctx.step("ship", ship, retry=RetryPolicy(max_attempts=3, initial_backoff=0.01))
            except StepFailed as e:
                ctx.step("refund", lambda: charge)
                return {"status": "compensated", "reason": e.message, "attempts": e.attempts}
            return {"status": "shipped"}

        self.serve()
        inst = self.client.start_workflow(definition=name, id=unique("saga"))
        done = wait_for(self.client, inst.id)
        self.assertEqual(done.status, "COMPLETED", done.state)
        self.assertEqual(done.output, {"status": "compensated", "reason": "carrier down", "attempts": 3})
        self.assertEqual(len(attempts), 3)
        steps = done.state["steps"]
        self.assertEqual((steps["ship"]["status"], steps["ship"]["attempts"]), ("FAILED", 3))
        self.assertEqual(steps["refund"]["output"], f"ch-{inst.id}/charge")

    def test_an_uncaught_step_failure_fails_the_workflow_at_once(self) -> None:
        name = unique("uncaught")
        runs: list[int] = []

        @self.worker.workflow(name, retry=RetryPolicy(max_attempts=5, initial_backoff=0.01))
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            runs.append(1)
            return ctx.step("boom", lambda: (_ for _ in ()).throw(PermanentError("bad card")))

        self.serve()
        done = wait_for(self.client, self.client.start_workflow(definition=name).id)
        self.assertEqual(done.status, "FAILED")
        self.assertIn("bad card", str(done.state["code"]["error"]))
        self.assertEqual(len(runs), 1)

    def test_a_failing_run_is_retried_and_replays(self) -> None:
        name = unique("retry")
        calls: list[int] = []

        @self.worker.workflow(name, retry=RetryPolicy(max_attempts=3, initial_backoff=0.05))
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            ctx.step("once", lambda: calls.append(1))
            if ctx.attempt < 2:
                raise RuntimeError("flaky")
            return ctx.attempt

        self.serve()
        done = wait_for(self.client, self.client.start_workflow(definition=name).id)
        self.assertEqual((done.status, done.output), ("COMPLETED", 2), done.state)
        self.assertEqual(len(calls), 1)

    def test_a_cancelled_workflow_stops_the_run(self) -> None:
        name = unique("cancel")
        started, release = threading.Event(), threading.Event()
        after: list[str] = []
        raised: list[BaseException] = []

        @self.worker.workflow(name)
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            def slow() -> str:
                started.set()
                release.wait(20)
                return "late"
            try:
                ctx.step("slow", slow)
            except Cancelled as e:
                raised.append(e)
                raise
            after.append("ran on")
            return "done"

        self.serve()
        inst = self.client.start_workflow(definition=name)
        self.assertTrue(started.wait(20))
        self.client._call("POST", f"/v1/workflows/{inst.id}/cancel", {})
        release.set()
        done = wait_for(self.client, inst.id)
        self.assertEqual(done.status, "CANCELLED")
        poll_until("the run to end", lambda: raised)
        self.assertEqual(after, [])
        self.assertNotIn("slow", done.state.get("steps", {}))

    def test_a_bad_step_name_fails_the_workflow(self) -> None:
        name = unique("badname")
        self.worker.workflow(name, lambda ctx, input: ctx.step("a b", lambda: 1))
        self.serve()
        done = wait_for(self.client, self.client.start_workflow(definition=name).id)
        self.assertEqual(done.status, "FAILED")
        self.assertIn("a b", str(done.state["code"]["error"]))


if __name__ == "__main__":
    unittest.main()
