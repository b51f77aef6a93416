// Command code-sleep-event serves the code workflow "invoice": it sends an
// invoice, sleeps, sends a reminder (by mail and SMS in parallel), then waits for the order's payment —
// an event "payment" published with the order id as its key — and sends a
// receipt. While it sleeps or waits it holds no worker: the run ends, and
// the server starts the next one (which replays the recorded steps) when
// the timer fires or the event comes.
//
// With a server running (`flowd serve`):
//
//	go run ./examples/code-sleep-event     # FLOWD_SERVER, FLOWD_TOKEN as for the CLI
//	flowd start invoice --id inv-o-7 --input '{"order": "o-7", "amount": 4200, "remind_after": "10s"}'
//	flowd event payment --key o-7 --data '{"amount": 4200, "method": "card"}'
//	flowd get inv-o-7                      # COMPLETED, output {"order": "o-7", "paid": 4200, …}
//
// A payment published while the workflow still sleeps is not lost: the
// wait that starts later takes it.
package main

import (
	"context"
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
		fmt.Fprintln(os.Stderr, "code-sleep-event:", err)
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
	w.Workflow("invoice", worker.Workflow{Run: worker.Func(invoice)})
	logger.Info("serving workflow invoice", "server", server)
	return w.Run(ctx) // until Ctrl-C / SIGTERM
}

// Invoice is the workflow's input.
type Invoice struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"` // in cents
	// RemindAfter is how long to wait before the reminder ("24h" when
	// empty).
	RemindAfter string `json:"remind_after"`
}

// Payment is the data of the event "payment".
type Payment struct {
	Amount int    `json:"amount"`
	Method string `json:"method"`
}

// Paid is the workflow's output.
type Paid struct {
	Order      string    `json:"order"`
	Paid       int       `json:"paid"`
	Method     string    `json:"method"`
	InvoicedAt time.Time `json:"invoiced_at"`
}

// invoice runs three times: from the start to the sleep, from the sleep to
// the wait for the payment, and from there to the end. Each run replays
// the steps recorded before it, whose functions do not run again.
func invoice(wf *worker.WorkflowContext, in Invoice) (Paid, error) {
	remindAfter := 24 * time.Hour
	if in.RemindAfter != "" {
		d, err := time.ParseDuration(in.RemindAfter)
		if err != nil {
			return Paid{}, worker.Permanent(fmt.Errorf("remind_after: %w", err))
		}
		remindAfter = d
	}
	// wf.Now, not time.Now: recorded once, the same in every run.
	invoicedAt := wf.Now()

	if _, err := worker.Step(wf, "send-invoice", func(ctx context.Context) (bool, error) {
		return true, mail.Send(ctx, worker.IdempotencyKey(ctx), in.Order, fmt.Sprintf("invoice: %d cents", in.Amount))
	}); err != nil {
		return Paid{}, worker.Permanent(err)
	}

	if err := wf.Sleep("grace", remindAfter); err != nil {
		return Paid{}, err
	}
	// The reminder goes out by mail and by SMS at once: two steps started
	// with worker.Go run in parallel, each recorded when it finishes.
	reminders := []*worker.Future[bool]{
		worker.Go(wf, "remind-by-mail", func(ctx context.Context) (bool, error) {
			return true, mail.Send(ctx, worker.IdempotencyKey(ctx), in.Order, "reminder: your invoice is due")
		}),
		worker.Go(wf, "remind-by-sms", func(ctx context.Context) (bool, error) {
			return true, sms.Send(ctx, worker.IdempotencyKey(ctx), in.Order, "reminder: your invoice is due")
		}),
	}
	for _, f := range reminders {
		if _, err := f.Get(); err != nil {
			return Paid{}, worker.Permanent(err)
		}
	}

	payment, err := worker.WaitForEvent[Payment](wf, "payment", "payment", worker.WithKey(in.Order))
	if err != nil {
		return Paid{}, worker.Permanent(err)
	}

	if _, err := worker.Step(wf, "send-receipt", func(ctx context.Context) (bool, error) {
		return true, mail.Send(ctx, worker.IdempotencyKey(ctx), in.Order, fmt.Sprintf("receipt: %d cents by %s", payment.Amount, payment.Method))
	}); err != nil {
		return Paid{}, worker.Permanent(err)
	}
	return Paid{Order: in.Order, Paid: payment.Amount, Method: payment.Method, InvoicedAt: invoicedAt}, nil
}

// messenger stands for a mail or SMS service's client. Send takes the
// step's idempotency key, the same for every attempt and run, so that a
// message sent again after a crash goes out once; here each call prints
// one line.
type messenger struct{ channel string }

var (
	mail = messenger{channel: "mail"}
	sms  = messenger{channel: "sms"}
)

func (m messenger) Send(_ context.Context, key, order, text string) error {
	fmt.Printf("%s to the customer of %s: %s (key %s)\n", m.channel, order, text, key)
	return nil
}
