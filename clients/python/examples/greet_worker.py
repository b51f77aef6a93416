#!/usr/bin/env python3
"""Serves the handler `greet` of examples/hello/hello.yaml until SIGTERM or SIGINT.

    flowd serve &
    flowd def apply examples/hello/hello.yaml
    PYTHONPATH=clients/python python3 clients/python/examples/greet_worker.py &
    flowd start hello --input '{"name": "Ada"}'
"""

import logging
import os

from flowd import Client, PermanentError, Worker

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

client = Client(os.environ.get("FLOWD_SERVER", "http://127.0.0.1:8080"), token=os.environ.get("FLOWD_TOKEN"))
worker = Worker(client, concurrency=4)


@worker.handle("greet")
def greet(task):
    name = (task.input or {}).get("name")
    if not name:
        raise PermanentError("input.name is required")  # retrying will not help
    return {"greeting": f"Hello, {name}!", "attempt": task.attempt}


if __name__ == "__main__":
    worker.run()  # returns once the tasks in flight have finished
