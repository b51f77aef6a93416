// Command code-saga serves the code workflow "order-saga": an order is a
// Go function whose steps — reserve the stock, charge the card, ship — are
// recorded on the server as they finish. When shipping fails for good, the
// steps done so far are undone in reverse order (refund, then release the
// stock) and the workflow completes with "status": "compensated".
//
// With a server running (`flowd serve`):
//
//	go run ./examples/code-saga      # FLOWD_SERVER, FLOWD_TOKEN as for the CLI
//	flowd start order-saga --input '{"id": "o-1", "sku": "A-1", "quantity": 2, "amount": 4200, "country": "PT"}'
//	flowd start order-saga --input '{"id": "o-2", "sku": "A-1", "quantity": 1, "amount": 2100, "country": "AQ"}'
//	flowd get <id>     # o-1: "shipped"; o-2: "compensated" (no carrier delivers to AQ)
//
// The services are stand-ins that print one line a call, with the call's
// idempotency key: each line shows a side effect, and each appears once.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "code-saga:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	server := os.Getenv("FLOWD_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	var opts []client.Option
	if token := os.Getenv("FLOWD_TOKEN"); token != "" {
		opts = append(opts, client.WithToken(token))
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	w := worker.New(client.New(server, opts...), worker.Options{Logger: logger})
	w.Workflow("order-saga", worker.Workflow{
		Run:     worker.Func(orderSaga),
		Timeout: time.Hour,
		// Runs of the function that fail (not its steps: each has its own
		// retry) are run again up to 5 times.
		Retry: &worker.RetryPolicy{MaxAttempts: 5},
	})
	logger.Info("serving workflow order-saga", "server", server)
	return w.Run(ctx) // until Ctrl-C / SIGTERM
}

// Order is the workflow's input.
type Order struct {
	ID       string `json:"id"`
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	Amount   int    `json:"amount"` // in cents
	Country  string `json:"country"`
}

// Result is the workflow's output.
type Result struct {
	Order       string `json:"order"`
	Status      string `json:"status"` // "shipped" or "compensated"
	Reservation string `json:"reservation"`
	Charge      string `json:"charge"`
	Shipment    string `json:"shipment,omitempty"`
	Reason      string `json:"reason,omitempty"` // why it was compensated
}

// orderSaga reserves, charges and ships. Each forward step that succeeds
// pushes the step that undoes it; when a later step fails for good, the
// undo steps run in reverse order and the order ends "compensated": a
// business outcome, so the workflow COMPLETES with it rather than failing
// (a FAILED workflow invites a retry, and there is nothing left to retry).
func orderSaga(wf *worker.WorkflowContext, o Order) (Result, error) {
	res := Result{Order: o.ID}
	var undo []func() error

	reservation, err := worker.Step(wf, "reserve", func(ctx context.Context) (string, error) {
		return stock.Reserve(ctx, worker.IdempotencyKey(ctx), o.SKU, o.Quantity)
	})
	if err != nil {
		return res, worker.Permanent(err) // nothing done yet, nothing to undo
	}
	res.Reservation = reservation
	undo = append(undo, func() error {
		_, err := worker.Step(wf, "release", func(ctx context.Context) (bool, error) {
			return true, stock.Release(ctx, worker.IdempotencyKey(ctx), reservation)
		}, worker.WithRetry(worker.RetryPolicy{MaxAttempts: 10}))
		return err
	})

	charge, err := worker.Step(wf, "charge", func(ctx context.Context) (string, error) {
		return payments.Charge(ctx, worker.IdempotencyKey(ctx), o.Amount)
	})
	if err != nil {
		return compensate(res, undo, err)
	}
	res.Charge = charge
	undo = append(undo, func() error {
		_, err := worker.Step(wf, "refund", func(ctx context.Context) (bool, error) {
			return true, payments.Refund(ctx, worker.IdempotencyKey(ctx), charge)
		}, worker.WithRetry(worker.RetryPolicy{MaxAttempts: 10}))
		return err
	})

	shipment, err := worker.Step(wf, "ship", func(ctx context.Context) (string, error) {
		return carrier.Ship(ctx, worker.IdempotencyKey(ctx), o.Country, reservation)
	}, worker.WithRetry(worker.RetryPolicy{MaxAttempts: 3, InitialBackoff: 200 * time.Millisecond}))
	if err != nil {
		return compensate(res, undo, err)
	}
	res.Status, res.Shipment = "shipped", shipment
	return res, nil
}

// compensate runs the undo steps in reverse order after a step failed for
// good (cause). Any other error from a step (an output that does not decode
// into its type) would be the same in every run: the workflow fails.
func compensate(res Result, undo []func() error, cause error) (Result, error) {
	var failed *worker.StepFailedError
	if !errors.As(cause, &failed) {
		return res, worker.Permanent(cause)
	}
	for i := len(undo) - 1; i >= 0; i-- {
		if err := undo[i](); err != nil {
			// A compensation that fails for good needs a person: the
			// workflow fails, saying which.
			return res, worker.Permanent(fmt.Errorf("%s failed and compensating it failed too: %w", failed.Step, err))
		}
	}
	res.Status, res.Reason = "compensated", failed.Message
	return res, nil
}

// The services below stand for real clients (a stock API, a payment
// provider, a carrier). Each takes the step's idempotency key, the same for
// every attempt and every run, so that a call made again after a crash
// does the work once; here each call prints one line instead.

type stockService struct{}

var stock stockService

func (stockService) Reserve(_ context.Context, key, sku string, quantity int) (string, error) {
	if quantity <= 0 {
		return "", worker.Permanent(fmt.Errorf("quantity must be positive, got %d", quantity))
	}
	fmt.Printf("reserve %d x %s (key %s)\n", quantity, sku, key)
	return "res-" + key, nil
}

func (stockService) Release(_ context.Context, key, reservation string) error {
	fmt.Printf("release %s (key %s)\n", reservation, key)
	return nil
}

type paymentService struct{}

var payments paymentService

func (paymentService) Charge(_ context.Context, key string, amount int) (string, error) {
	if amount <= 0 {
		return "", worker.Permanent(fmt.Errorf("amount must be positive, got %d", amount))
	}
	fmt.Printf("charge %d (key %s)\n", amount, key)
	return "ch-" + key, nil
}

func (paymentService) Refund(_ context.Context, key, charge string) error {
	fmt.Printf("refund %s (key %s)\n", charge, key)
	return nil
}

type carrierService struct{}

var carrier carrierService

func (carrierService) Ship(_ context.Context, key, country, reservation string) (string, error) {
	fmt.Printf("ship %s to %s (key %s)\n", reservation, country, key)
	if country == "AQ" {
		// No retry mends this: the step fails for good at once.
		return "", worker.Permanent(fmt.Errorf("no carrier delivers to %s", country))
	}
	return "shp-" + key, nil
}
