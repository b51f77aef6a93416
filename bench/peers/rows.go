package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// rowsConfig is the rows subcommand's flags.
type rowsConfig struct {
	db string
}

func parseRows(args []string, stderr io.Writer) (rowsConfig, error) {
	var c rowsConfig
	fs := newFlags("rows", &c.db, stderr)
	return c, parseFlags(fs, args, &c.db)
}

// runRows reads a `flowd bench` JSON line from in and writes it to out
// with the rows the run wrote added (see addRows), counted once the run's
// sessions had all closed; the database was fresh, so from zero.
func runRows(ctx context.Context, cfg rowsConfig, in io.Reader, out io.Writer) error {
	line, err := bufio.NewReader(in).ReadBytes('\n')
	if err != nil && err != io.EOF {
		return fmt.Errorf("reading the bench line: %w", err)
	}
	if _, err := addRows(line, 0); err != nil {
		return err // before waiting on the database
	}
	m, err := openMeter(ctx, cfg.db)
	if err != nil {
		return err
	}
	defer m.close()
	rows, err := m.rowsWritten(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	annotated, err := addRows(line, rows)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", annotated)
	return err
}

// addRows returns the JSON object line with "rows" and "rows_per_item"
// added, the latter per workflow the run completed ("completed", else
// "ops"; left out when neither is above 0). The line's own fields keep
// their order.
func addRows(line []byte, rows int64) ([]byte, error) {
	line = bytes.TrimSpace(line)
	var fields struct {
		Ops       int64 `json:"ops"`
		Completed int64 `json:"completed"`
	}
	if len(line) < 2 || line[0] != '{' || json.Unmarshal(line, &fields) != nil {
		return nil, fmt.Errorf("the input is not a bench JSON object: %q", line)
	}
	items := fields.Completed
	if items == 0 {
		items = fields.Ops
	}
	added := fmt.Sprintf(`"rows":%d`, rows)
	if items > 0 {
		added += fmt.Sprintf(`,"rows_per_item":%g`, round3(float64(rows)/float64(items)))
	}
	body := bytes.TrimSpace(line[1 : len(line)-1])
	if len(body) > 0 {
		added = "," + added
	}
	return fmt.Appendf(nil, "{%s%s}", body, added), nil
}
