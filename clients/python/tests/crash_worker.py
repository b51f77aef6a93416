"""A worker process for test_crash.py: serves the code workflow $WORKFLOW, whose
steps append one line each to the file $EFFECTS, and SIGKILLs itself once (the
first time, when the file $MARKER does not exist yet) where $MODE says:
"before-checkpoint" (in step a's function, after its effect) or
"after-checkpoint" (once step a is recorded)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any, Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import flowd  # noqa: E402

EFFECTS, MARKER, MODE = os.environ["EFFECTS"], os.environ["MARKER"], os.environ["MODE"]


def die_once(where: str) -> None:
    if MODE == where and not os.path.exists(MARKER):
        open(MARKER, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)


def effect(name: str) -> Callable[[], Any]:
    def fn() -> Any:
        with open(EFFECTS, "a") as f:
            f.write(f"{name} {flowd.idempotency_key()}\n")
            f.flush()
            os.fsync(f.fileno())
        if name == "a":
            die_once("before-checkpoint")
        return name.upper()
    return fn


def main() -> None:
    client = flowd.Client(os.environ["FLOWD_SERVER"])
    worker = flowd.Worker(client, wait_seconds=1, lease_seconds=1, concurrency=1)

    @worker.workflow(os.environ["WORKFLOW"])
    def wf(ctx: flowd.WorkflowContext, input: Any) -> Any:
        a = ctx.step("a", effect("a"))
        die_once("after-checkpoint")
        b = ctx.step("b", effect("b"))
        return [a, b]

    worker.start()  # puts the definition, then polls
    print("serving", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(0.2):
        pass
    worker.stop()


if __name__ == "__main__":
    main()
