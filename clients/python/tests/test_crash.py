"""Code workflows across crashes: a worker process SIGKILLed around a step's
checkpoint, and a sleep across a server restart."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import unittest
import uuid
from typing import Any

from flowd import Worker, WorkflowContext
from flowd_server import FlowdServer, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class CrashTest(unittest.TestCase):
    def setUp(self) -> None:
        self.server = FlowdServer()
        self.addCleanup(self.server.close)
        tmp = tempfile.TemporaryDirectory(prefix="flowd-crash-")
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name

    def worker_process(self, workflow: str, mode: str) -> subprocess.Popen:
        env = {**os.environ, "FLOWD_SERVER": self.server.url, "WORKFLOW": workflow, "MODE": mode,
               "EFFECTS": os.path.join(self.tmp, "effects"), "MARKER": os.path.join(self.tmp, "marker")}
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "crash_worker.py")], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(proc.stdout.close)  # type: ignore[union-attr]
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        self.assertEqual(proc.stdout.readline().strip(), "serving")  # type: ignore[union-attr]
        return proc

    def crash_and_recover(self, mode: str) -> tuple[list[str], Any, str]:
        name = unique("crash")
        first = self.worker_process(name, mode)
        inst = self.server.client.start_workflow(definition=name, id=unique("wf"))
        first.wait(30)
        self.assertEqual(first.returncode, -9, "the worker should have SIGKILLed itself")
        second = self.worker_process(name, mode)
        done = wait_for(self.server.client, inst.id)
        second.terminate()
        second.wait(30)
        with open(os.path.join(self.tmp, "effects")) as f:
            effects = f.read().splitlines()
        return effects, done, inst.id

    def test_killed_between_a_steps_effect_and_its_checkpoint_the_step_runs_again(self) -> None:
        effects, done, wf_id = self.crash_and_recover("before-checkpoint")
        self.assertEqual((done.status, done.output), ("COMPLETED", ["A", "B"]), done.state)
        # The effect happened twice (same idempotency key), the checkpoint once.
        self.assertEqual(effects, [f"a {wf_id}/a", f"a {wf_id}/a", f"b {wf_id}/b"])
        causes = [v["cause"] for v in self.server.client.history(wf_id)]
        self.assertEqual(causes.count('step "a" completed'), 1)
        self.assertEqual(done.state["steps"]["a"]["attempts"], 1)

    def test_killed_after_a_steps_checkpoint_the_step_does_not_run_again(self) -> None:
        effects, done, wf_id = self.crash_and_recover("after-checkpoint")
        self.assertEqual((done.status, done.output), ("COMPLETED", ["A", "B"]), done.state)
        self.assertEqual(effects, [f"a {wf_id}/a", f"b {wf_id}/b"])
        causes = [v["cause"] for v in self.server.client.history(wf_id)]
        self.assertEqual(causes.count('step "a" completed'), 1)
        self.assertEqual(causes.count('step "b" completed'), 1)

    def test_a_sleep_across_a_server_restart(self) -> None:
        name = unique("restart")
        worker = Worker(self.server.client, wait_seconds=1, concurrency=1, shutdown_grace=5)
        runs: list[int] = []

        @worker.workflow(name)
        def wf(ctx: WorkflowContext, input: Any) -> Any:
            runs.append(1)
            before = ctx.step("before", lambda: "b")
            ctx.sleep("nap", 1.5)
            return [before, ctx.step("after", lambda: "a")]

        worker.start()
        self.addCleanup(worker.stop)
        inst = self.server.client.start_workflow(definition=name)
        deadline = time.monotonic() + 20
        while self.server.client.get_workflow(inst.id).state.get("steps", {}).get("nap", {}).get("status") != "WAITING":
            self.assertLess(time.monotonic(), deadline, "the sleep was never recorded")
            time.sleep(0.02)
        self.server.restart()
        done = wait_for(self.server.client, inst.id)
        self.assertEqual((done.status, done.output), ("COMPLETED", ["b", "a"]), done.state)
        self.assertEqual(len(runs), 2)
        self.assertIsNone(worker.error)


if __name__ == "__main__":
    unittest.main()
