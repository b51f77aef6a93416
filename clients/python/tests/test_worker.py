import threading
import time
import unittest
import uuid

from flowd import Client, NotFoundError, PermanentError, Worker
from flowd_server import FlowdServer, wait_for

server: FlowdServer


def setUpModule():
    global server
    server = FlowdServer()


def tearDownModule():
    server.close()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class WorkerTest(unittest.TestCase):
    """Each test serves a handler name of its own, so that workers of other
    tests never take its tasks."""

    def setUp(self):
        self.client = server.client
        self.handler = unique("h")

    def define(self, step: dict) -> str:
        name = unique("def")
        step = {"id": "a", "type": "task", "handler": self.handler, **step}
        self.client.put_definition(name, {"name": name, "steps": [step]})
        return name

    def start_worker(self, fn, **options) -> Worker:
        options.setdefault("wait_seconds", 1)
        w = Worker(self.client, name=unique("w"), **options)
        w.handle(self.handler, fn)
        w.start()
        self.addCleanup(w.stop, 0)
        return w

    def test_completes_the_step_with_the_handlers_output(self):
        definition = self.define({"input": {"name": "{{ .input.name }}"}})

        def greet(task):
            return {"greeting": f"Hello, {task.input['name']}!", "attempt": task.attempt,
                    "key": task.idempotency_key, "index": task.index, "step": task.step}
        self.start_worker(greet)
        inst = self.client.start_workflow(definition=definition, input={"name": "Ada"})
        done = wait_for(self.client, inst.id)
        self.assertEqual(done.status, "COMPLETED")
        self.assertEqual(done.state["steps"]["a"]["output"], {
            "greeting": "Hello, Ada!", "attempt": 1, "key": f"{inst.id}/a", "index": None, "step": "a"})

    def test_foreach_iterations_get_their_index(self):
        definition = self.define({"foreach": ".input.items", "input": {"item": "{{ .item }}"}})
        self.start_worker(lambda t: {"index": t.index, "item": t.input["item"], "key": t.idempotency_key},
                          concurrency=2)
        inst = self.client.start_workflow(definition=definition, input={"items": ["x", "y", "z"]})
        done = wait_for(self.client, inst.id)
        self.assertEqual(done.status, "COMPLETED")
        self.assertEqual(done.state["steps"]["a"]["output"], [
            {"index": i, "item": item, "key": f"{inst.id}/a/{i}"} for i, item in enumerate("xyz")])

    def test_a_failing_handler_is_retried(self):
        definition = self.define({"retry": {"max_attempts": 3, "initial_backoff": "50ms", "max_backoff": "100ms"}})

        def flaky(task):
            if task.attempt == 1:
                raise RuntimeError("the database blinked")
            return {"attempt": task.attempt}
        self.start_worker(flaky)
        inst = self.client.start_workflow(definition=definition)
        done = wait_for(self.client, inst.id)
        self.assertEqual(done.status, "COMPLETED")
        step = done.state["steps"]["a"]
        self.assertEqual(step["output"], {"attempt": 2})
        self.assertEqual(step["attempts"], 2)

    def test_a_permanent_error_fails_the_step_without_retry(self):
        definition = self.define({"retry": {"max_attempts": 5, "initial_backoff": "50ms"}})
        calls = []

        def refuse(task):
            calls.append(task.attempt)
            raise PermanentError("input.amount must be positive")
        self.start_worker(refuse)
        inst = self.client.start_workflow(definition=definition)
        done = wait_for(self.client, inst.id)
        self.assertEqual(done.status, "FAILED")
        step = done.state["steps"]["a"]
        self.assertEqual((step["status"], step["attempts"]), ("FAILED", 1))
        self.assertIn("input.amount must be positive", step["error"])
        self.assertEqual(calls, [1])

    def test_a_value_that_is_not_json_fails_the_step(self):
        definition = self.define({})
        self.start_worker(lambda t: {1, 2})
        done = wait_for(self.client, self.client.start_workflow(definition=definition).id)
        self.assertEqual(done.status, "FAILED")
        self.assertIn("not JSON", done.state["steps"]["a"]["error"])

    def test_heartbeats_keep_a_task_longer_than_its_lease(self):
        definition = self.define({})
        calls = []

        def slow(task):
            calls.append(task.attempt)
            # Well past two leases: without heartbeats the sweeper would take the
            # task back and deliver it again as attempt 2.
            time.sleep(5)
            return {"attempt": task.attempt, "cancelled": task.cancelled.is_set()}
        self.start_worker(slow, lease_seconds=2)
        inst = self.client.start_workflow(definition=definition)
        done = wait_for(self.client, inst.id)
        self.assertEqual(done.status, "COMPLETED")
        self.assertEqual(done.state["steps"]["a"]["output"], {"attempt": 1, "cancelled": False})
        self.assertEqual(done.state["steps"]["a"]["attempts"], 1)
        self.assertEqual(calls, [1])

    def test_a_lost_lease_cancels_the_task(self):
        definition = self.define({})
        running, seen = threading.Event(), []

        def wait_for_cancel(task):
            running.set()
            task.cancelled.wait(20)
            seen.append(task.cancel_reason)
            return "dropped anyway"
        self.start_worker(wait_for_cancel, lease_seconds=1)
        inst = self.client.start_workflow(definition=definition)
        self.assertTrue(running.wait(20))
        # Completing the step by hand takes the task away from the worker.
        self.client.complete_step(inst.id, "a", "by hand", if_match="*")
        done = wait_for(self.client, inst.id)
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(done.state["steps"]["a"]["output"], "by hand")
        self.assertEqual(len(seen), 1)
        self.assertIn("lost the lease", seen[0])

    def test_the_steps_timeout_cancels_the_task(self):
        definition = self.define({"timeout": "2s", "retry": {"max_attempts": 1}})
        tasks = []

        def overrun(task):
            tasks.append(task)
            task.cancelled.wait(20)
            return "too late"
        # Heartbeats cannot move the lease past the step's timeout.
        self.start_worker(overrun, lease_seconds=1)
        done = wait_for(self.client, self.client.start_workflow(definition=definition).id)
        self.assertEqual(done.status, "FAILED")
        self.assertIn("timed out", done.state["steps"]["a"]["error"])
        self.assertEqual(len(tasks), 1)
        self.assertTrue(tasks[0].cancelled.wait(20), "the handler is told to give up")

    def test_stop_lets_a_running_handler_finish(self):
        definition = self.define({})
        started = threading.Event()

        def finish_slowly(task):
            started.set()
            time.sleep(1)
            return "finished"
        w = self.start_worker(finish_slowly, wait_seconds=20)
        inst = self.client.start_workflow(definition=definition)
        self.assertTrue(started.wait(20))
        self.assertTrue(w.stop(timeout=15), "nothing abandoned")
        # The outcome is reported before stop returns.
        after = self.client.get_workflow(inst.id)
        self.assertEqual(after.status, "COMPLETED")
        self.assertEqual(after.state["steps"]["a"]["output"], "finished")

    def test_stop_abandons_a_handler_past_the_grace(self):
        definition = self.define({})
        started, tasks = threading.Event(), []

        def stuck(task):
            tasks.append(task)
            started.set()
            task.cancelled.wait(20)
            return "too late"
        w = self.start_worker(stuck)
        inst = self.client.start_workflow(definition=definition)
        self.assertTrue(started.wait(20))
        self.assertFalse(w.stop(timeout=0.1))
        self.assertTrue(tasks[0].cancelled.is_set())
        self.assertIn("abandoned", tasks[0].cancel_reason)
        self.assertEqual(self.client.get_workflow(inst.id).state["steps"]["a"]["status"], "RUNNING")

    def test_a_server_that_refuses_the_worker_stops_it_with_the_error(self):
        w = Worker(Client(server.url + "/not-flowd"), wait_seconds=1)
        w.handle(self.handler, lambda t: None)
        with self.assertRaises(NotFoundError):
            w.run(handle_signals=False)

    def test_invalid_options(self):
        for options in ({"concurrency": 0}, {"lease_seconds": 0.5}, {"wait_seconds": 61}):
            with self.subTest(options=options), self.assertRaises(ValueError):
                Worker(self.client, **options)
        w = Worker(self.client)
        for name in ("", "flowd:sleep"):
            with self.subTest(name=name), self.assertRaises(ValueError):
                w.handle(name, lambda t: None)
        with self.assertRaises(ValueError):
            w.start()


if __name__ == "__main__":
    unittest.main()
