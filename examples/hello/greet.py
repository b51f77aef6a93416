#!/usr/bin/env python3
"""The greet handler of examples/hello, run by
flowd worker --handler greet='python3 examples/hello/greet.py'.

flowd runs it once per task: the step's input JSON arrives on stdin, and the
JSON printed on stdout becomes the step's output. Exit status 100 fails the
step for good; any other non-zero status fails the attempt, which is retried.
What is printed on stderr becomes the error. The task is described in the
environment too: FLOWD_WORKFLOW_ID, FLOWD_STEP, FLOWD_ATTEMPT and
FLOWD_IDEMPOTENCY_KEY.
"""
import json
import sys

task_input = json.load(sys.stdin)
name = task_input.get("name") if isinstance(task_input, dict) else None
if not isinstance(name, str) or not name:
    print('greet needs the input {"name": "..."}', file=sys.stderr)
    sys.exit(100)  # retrying cannot fix the input

json.dump({"greeting": f"Hello, {name}!"}, sys.stdout)
print()
