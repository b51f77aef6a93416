#!/usr/bin/env python3
"""Serves the code workflow "order-saga": an order is a Python function whose
steps (reserve the stock, charge the card, ship) are recorded on the server as
they finish. When shipping fails for good, the steps done so far are undone in
reverse order (refund, then release the stock) and the workflow completes with
"status": "compensated". The Python twin of examples/code-saga.

    flowd serve &
    PYTHONPATH=clients/python python3 clients/python/examples/code_saga.py &   # FLOWD_SERVER, FLOWD_TOKEN
    flowd start order-saga --input '{"id": "o-1", "sku": "A-1", "quantity": 2, "amount": 4200, "country": "PT"}'
    flowd start order-saga --input '{"id": "o-2", "sku": "A-1", "quantity": 1, "amount": 2100, "country": "AQ"}'
    flowd get <id>     # o-1: "shipped"; o-2: "compensated" (no carrier delivers to AQ)

The services are stand-ins that print one line a call, with the call's
idempotency key: each line shows a side effect, and each appears once.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

import flowd
from flowd import PermanentError, RetryPolicy, StepFailed, WorkflowContext

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

client = flowd.Client(os.environ.get("FLOWD_SERVER", "http://127.0.0.1:8080"), token=os.environ.get("FLOWD_TOKEN"))
worker = flowd.Worker(client)


# Runs of the function that fail (not its steps: each has its own retry) are
# run again up to 5 times.
@worker.workflow("order-saga", timeout=3600, retry=RetryPolicy(max_attempts=5))
def order_saga(ctx: WorkflowContext, order: dict[str, Any]) -> dict[str, Any]:
    """Reserves, charges and ships. Each forward step that succeeds pushes the
    step that undoes it; when a later step fails for good, the undo steps run
    in reverse order and the order ends "compensated": a business outcome, so
    the workflow COMPLETES with it rather than failing."""
    res: dict[str, Any] = {"order": order["id"]}
    undo: list[Callable[[], Any]] = []

    try:
        reservation = ctx.step("reserve", lambda: stock_reserve(flowd.idempotency_key(), order["sku"], order["quantity"]))
    except StepFailed as e:
        raise PermanentError(str(e)) from e  # nothing done yet, nothing to undo
    res["reservation"] = reservation
    undo.append(lambda: ctx.step("release", lambda: stock_release(flowd.idempotency_key(), reservation),
                                 retry=RetryPolicy(max_attempts=10)))

    try:
        charge = ctx.step("charge", lambda: payments_charge(flowd.idempotency_key(), order["amount"]))
    except StepFailed as e:
        return compensate(res, undo, e)
    res["charge"] = charge
    undo.append(lambda: ctx.step("refund", lambda: payments_refund(flowd.idempotency_key(), charge),
                                 retry=RetryPolicy(max_attempts=10)))

    try:
        shipment = ctx.step("ship", lambda: carrier_ship(flowd.idempotency_key(), order["country"], reservation),
                            retry=RetryPolicy(max_attempts=3, initial_backoff=0.2))
    except StepFailed as e:
        return compensate(res, undo, e)
    res["status"], res["shipment"] = "shipped", shipment
    return res


def compensate(res: dict[str, Any], undo: list[Callable[[], Any]], failed: StepFailed) -> dict[str, Any]:
    """Runs the undo steps in reverse order after the step failed failed for good."""
    for step in reversed(undo):
        try:
            step()
        except StepFailed as e:
            # A compensation that fails for good needs a person: the workflow
            # fails, saying which.
            raise PermanentError(f"{failed.step} failed and compensating it failed too: {e}") from e
    res["status"], res["reason"] = "compensated", failed.message
    return res


# The services below stand for real clients (a stock API, a payment provider,
# a carrier). Each takes the step's idempotency key, the same for every attempt
# and every run, so that a call made again after a crash does the work once;
# here each call prints one line instead.

def stock_reserve(key: str, sku: str, quantity: int) -> str:
    if quantity <= 0:
        raise PermanentError(f"quantity must be positive, got {quantity}")
    print(f"reserve {quantity} x {sku} (key {key})", flush=True)
    return "res-" + key


def stock_release(key: str, reservation: str) -> bool:
    print(f"release {reservation} (key {key})", flush=True)
    return True


def payments_charge(key: str, amount: int) -> str:
    if amount <= 0:
        raise PermanentError(f"amount must be positive, got {amount}")
    print(f"charge {amount} (key {key})", flush=True)
    return "ch-" + key


def payments_refund(key: str, charge: str) -> bool:
    print(f"refund {charge} (key {key})", flush=True)
    return True


def carrier_ship(key: str, country: str, reservation: str) -> str:
    print(f"ship {reservation} to {country} (key {key})", flush=True)
    if country == "AQ":
        # No retry mends this: the step fails for good at once.
        raise PermanentError(f"no carrier delivers to {country}")
    return "shp-" + key


if __name__ == "__main__":
    worker.run()  # until SIGTERM or SIGINT
