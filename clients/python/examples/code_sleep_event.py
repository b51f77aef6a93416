#!/usr/bin/env python3
"""Serves the code workflow "invoice": send an invoice, sleep, send a reminder
by mail and by SMS at once, wait for the payment event, send a receipt. The
Python twin of examples/code-sleep-event.

    flowd serve &
    PYTHONPATH=clients/python python3 clients/python/examples/code_sleep_event.py &   # FLOWD_SERVER, FLOWD_TOKEN
    flowd start invoice --id inv-o-7 --input '{"order": "o-7", "amount": 4200, "remind_after": "10s"}'
    flowd event payment --key o-7 --data '{"amount": 4200, "method": "card"}'   # after the reminder, or before
    flowd get inv-o-7        # COMPLETED, output {"order": "o-7", "paid": 4200, "method": "card", ...}

The messengers are stand-ins that print one line a call, with the call's
idempotency key: each line shows a side effect, and each appears once.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

import flowd
from flowd import PermanentError, WorkflowContext

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

client = flowd.Client(os.environ.get("FLOWD_SERVER", "http://127.0.0.1:8080"), token=os.environ.get("FLOWD_TOKEN"))
worker = flowd.Worker(client)


@worker.workflow("invoice")
def invoice(ctx: WorkflowContext, inv: dict[str, Any]) -> dict[str, Any]:
    """Runs three times: from the start to the sleep, from the sleep to the wait
    for the payment, and from there to the end. Each run replays the steps
    recorded before it, whose functions do not run again."""
    order, amount = inv["order"], inv["amount"]
    remind_after = seconds(inv.get("remind_after") or "24h")
    # ctx.now, not datetime.now: recorded once, the same in every run.
    invoiced_at = ctx.now()

    ctx.step("send-invoice", lambda: send("mail", order, f"invoice: {amount} cents"))
    ctx.sleep("grace", remind_after)
    # The reminder goes out by mail and by SMS at once: two steps run in
    # parallel, each recorded when it finishes.
    ctx.parallel([
        ("remind-by-mail", lambda: send("mail", order, "reminder: your invoice is due")),
        ("remind-by-sms", lambda: send("sms", order, "reminder: your invoice is due")),
    ])
    payment = ctx.wait_for_event("payment", "payment", key=order)
    ctx.step("send-receipt", lambda: send("mail", order, f"receipt: {payment['amount']} cents by {payment['method']}"))
    return {"order": order, "paid": payment["amount"], "method": payment["method"],
            "invoiced_at": invoiced_at.isoformat().replace("+00:00", "Z")}


def seconds(duration: str) -> float:
    """A duration such as "10s", "5m", "1h30m" or "250ms", in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise PermanentError(f"remind_after: {duration!r} is not a duration such as \"10s\" or \"24h\"")
    return sum(float(n) * units[u] for n, u in parts)


def send(channel: str, order: str, text: str) -> bool:
    """Stands for a mail or SMS service's client: it takes the step's
    idempotency key, so that a message sent again after a crash goes out once."""
    # One write per line: the reminders are parallel steps, and print's
    # text and newline, written apart, would interleave.
    sys.stdout.write(f"{channel} to the customer of {order}: {text} (key {flowd.idempotency_key()})\n")
    sys.stdout.flush()
    return True


if __name__ == "__main__":
    worker.run()  # until SIGTERM or SIGINT
