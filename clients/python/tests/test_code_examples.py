"""examples/code_saga.py and examples/code_sleep_event.py against a real flowd serve."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import unittest
from collections import Counter
from datetime import datetime
from typing import Any, Callable

from flowd import Client, Instance, NotFoundError
from flowd_server import FlowdServer, wait_for

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")


def poll(client: Client, wf_id: str, cond: Callable[[Instance], bool], timeout: float = 30) -> Instance:
    deadline = time.monotonic() + timeout
    while True:
        inst = client.get_workflow(wf_id)
        if cond(inst):
            return inst
        if time.monotonic() > deadline:
            raise AssertionError(f"{wf_id}: condition not met in {timeout}s: {inst.status} {inst.state}")
        time.sleep(0.02)


def timeline(inst: Instance) -> list[str]:
    steps = inst.state.get("steps", {})
    return [f"{k} {v['status']}" for k, v in sorted(steps.items(), key=lambda kv: kv[1]["seq"])]


def side_effects(out: str) -> Counter[str]:
    return Counter(re.findall(r"\(key (\S+)\)$", out, re.M))


class CodeExamplesTest(unittest.TestCase):
    def run_example(self, script: str, definition: str) -> tuple[Client, Callable[[], str]]:
        server = FlowdServer()
        self.addCleanup(server.close)
        env = {**os.environ, "FLOWD_SERVER": server.url,
               "PYTHONPATH": os.path.join(HERE, "..") + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.Popen([sys.executable, os.path.join(EXAMPLES, script)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        self.addCleanup(proc.stdout.close)  # type: ignore[union-attr]
        deadline = time.monotonic() + 30
        while True:  # the worker puts its definition when it starts
            try:
                server.client.get_definition(definition)
                break
            except NotFoundError:
                self.assertIsNone(proc.poll(), f"{script} exited before putting {definition}")
                self.assertLess(time.monotonic(), deadline, f"{script} never put {definition}")
                time.sleep(0.02)

        def stop() -> str:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
            self.assertEqual(proc.returncode, 0)
            return out
        return server.client, stop

    def test_code_saga(self) -> None:
        c, stop = self.run_example("code_saga.py", "order-saga")
        c.start_workflow(definition="order-saga", id="o-1",
                         input={"id": "o-1", "sku": "A-1", "quantity": 2, "amount": 4200, "country": "PT"})
        c.start_workflow(definition="order-saga", id="o-2",
                         input={"id": "o-2", "sku": "A-1", "quantity": 1, "amount": 2100, "country": "AQ"})
        shipped, compensated = wait_for(c, "o-1"), wait_for(c, "o-2")
        out = stop()
        self.assertEqual(shipped.status, "COMPLETED", shipped.state)
        self.assertEqual(shipped.output, {"order": "o-1", "status": "shipped", "reservation": "res-o-1/reserve",
                                          "charge": "ch-o-1/charge", "shipment": "shp-o-1/ship"})
        self.assertEqual(timeline(shipped), ["reserve COMPLETED", "charge COMPLETED", "ship COMPLETED"])
        self.assertEqual(compensated.status, "COMPLETED", compensated.state)
        self.assertEqual(compensated.output, {"order": "o-2", "status": "compensated",
                                              "reservation": "res-o-2/reserve", "charge": "ch-o-2/charge",
                                              "reason": "no carrier delivers to AQ"})
        self.assertEqual(timeline(compensated), ["reserve COMPLETED", "charge COMPLETED", "ship FAILED",
                                                 "refund COMPLETED", "release COMPLETED"])
        calls = side_effects(out)
        want = {f"{o}/{s}" for o in ("o-1", "o-2") for s in ("reserve", "charge", "ship")} | {"o-2/refund", "o-2/release"}
        self.assertEqual(set(calls), want, out)
        self.assertTrue(all(n == 1 for n in calls.values()), calls)

    def test_code_sleep_event(self) -> None:
        c, stop = self.run_example("code_sleep_event.py", "invoice")
        c.start_workflow(definition="invoice", id="inv-o-7", input={"order": "o-7", "amount": 4200, "remind_after": "300ms"})
        c.start_workflow(definition="invoice", id="inv-o-8", input={"order": "o-8", "amount": 900, "remind_after": "1s"})

        # o-8 pays while it still sleeps: nobody waits for the payment yet.
        poll(c, "inv-o-8", lambda i: i.state.get("steps", {}).get("grace", {}).get("status") == "WAITING")
        pub = c.publish_event("payment", key="o-8", data={"amount": 900, "method": "transfer"})
        self.assertFalse(pub.get("delivered"), pub)

        # o-7 sleeps, reminds, then waits; its payment completes the wait.
        waiting = poll(c, "inv-o-7", lambda i: i.state.get("steps", {}).get("payment", {}).get("status") == "WAITING")
        got = [re.sub(r"remind-by-(mail|sms)", "remind-by-*", s) for s in timeline(waiting)]
        self.assertEqual(got, ["flowd:now COMPLETED", "send-invoice COMPLETED", "grace COMPLETED",
                               "remind-by-* COMPLETED", "remind-by-* COMPLETED", "payment WAITING"])
        pub = c.publish_event("payment", key="o-7", data={"amount": 4200, "method": "card"})
        self.assertEqual(pub.get("delivered"), ["inv-o-7"])

        done = {i: wait_for(c, i) for i in ("inv-o-7", "inv-o-8")}
        out = stop()
        for wf_id, (paid, method) in {"inv-o-7": (4200, "card"), "inv-o-8": (900, "transfer")}.items():
            inst = done[wf_id]
            self.assertEqual(inst.status, "COMPLETED", inst.state)
            output: dict[str, Any] = inst.output
            self.assertEqual((output["order"], output["paid"], output["method"]), (wf_id[4:], paid, method))
            now = inst.state["steps"]["flowd:now"]["output"]
            self.assertEqual(datetime.fromisoformat(output["invoiced_at"].replace("Z", "+00:00")),
                             datetime.fromisoformat(now.replace("Z", "+00:00")))
            # Three runs: to the sleep, to the wait, to the end.
            self.assertEqual(inst.state["code"].get("run"), 3, inst.state["code"])
            self.assertFalse(inst.state["code"].get("waiting"))
        calls = side_effects(out)
        for order in ("o-7", "o-8"):
            for step in ("send-invoice", "remind-by-mail", "remind-by-sms", "send-receipt"):
                self.assertEqual(calls[f"inv-{order}/{step}"], 1, out)
        self.assertEqual(sum(calls.values()), 8, out)


if __name__ == "__main__":
    unittest.main()
