package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v2"

	"github.com/flowd/flowd/api"
	"github.com/flowd/flowd/client"
)

func newScheduleCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Manage schedules (apply, list, get, delete, pause, resume, trigger, backfill)",
		Long: `schedule manages the schedules of a server: each starts an instance of a
definition at the fire times of a cron expression, in a time zone (see
docs/schedules.md). The instance of a fire time has the id
NAME-<fire time in UTC as 20261125T040000Z>.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newScheduleApplyCmd(e), newScheduleListCmd(e), newScheduleGetCmd(e), newScheduleDeleteCmd(e),
		newSchedulePauseCmd(e, true), newSchedulePauseCmd(e, false), newScheduleTriggerCmd(e), newScheduleBackfillCmd(e))
	return cmd
}

// scheduleFile is what `schedule apply` reads: the body of
// PUT /v1/schedules/{name} and the name.
type scheduleFile struct {
	Name          string `yaml:"name"`
	Definition    string `yaml:"definition"`
	Cron          string `yaml:"cron"`
	Timezone      string `yaml:"timezone"`
	Input         any    `yaml:"input"`
	Overlap       string `yaml:"overlap"`
	Paused        bool   `yaml:"paused"`
	CatchupWindow string `yaml:"catchup_window"`
}

// parseScheduleFile reads a schedule from YAML or JSON (JSON is YAML); an
// unknown field is an error, so a misspelt one is not silently ignored.
func parseScheduleFile(data []byte, source string) (string, api.PutScheduleRequest, error) {
	var f scheduleFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return "", api.PutScheduleRequest{}, usageError("the schedule in %s: %v", source, err)
	}
	if strings.TrimSpace(f.Name) == "" {
		return "", api.PutScheduleRequest{}, usageError("the schedule in %s has no name", source)
	}
	req := api.PutScheduleRequest{Definition: f.Definition, Cron: f.Cron, Timezone: f.Timezone,
		Overlap: f.Overlap, Paused: f.Paused, CatchupWindow: f.CatchupWindow}
	if f.Input != nil {
		in, err := json.Marshal(jsonValue(f.Input))
		if err != nil {
			return "", api.PutScheduleRequest{}, usageError("the schedule in %s: input: %v", source, err)
		}
		req.Input = in
	}
	return f.Name, req, nil
}

// jsonValue turns what the YAML decoder made (maps with keys of any type)
// into values encoding/json takes.
func jsonValue(v any) any {
	switch v := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, val := range v {
			m[fmt.Sprint(k)] = jsonValue(val)
		}
		return m
	case []any:
		for i := range v {
			v[i] = jsonValue(v[i])
		}
		return v
	}
	return v
}

func newScheduleApplyCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Create or replace a schedule from a YAML or JSON file",
		Long: `apply stores the schedule in FILE ("-" reads stdin) under the name the file
gives it: the fields of PUT /v1/schedules/{name} (definition, cron, timezone,
input, overlap, paused, catchup_window) and name. A schedule that exists is
replaced; the fire times it already fired are not fired again. A schedule
the server refuses is listed with every problem it has, one a line (exit 1).
` + clientHelp,
		Example: `  flowd schedule apply nightly.yaml
  echo '{"name": "nightly", "definition": "report", "cron": "0 4 * * *"}' | flowd schedule apply -`,
		Args: exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := readDefinitionFile(e, args[0])
			if err != nil {
				return err
			}
			source := args[0]
			if source == "-" {
				source = "stdin"
			}
			name, req, err := parseScheduleFile(data, source)
			if err != nil {
				return err
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			s, created, err := c.PutSchedule(cmd.Context(), name, req)
			var ae *client.APIError
			if errors.As(err, &ae) && len(ae.Problems) > 0 {
				// One a line, as def apply lists a definition's.
				return invalidDefinition(fmt.Sprintf("schedule %q", name), ae.Problems)
			}
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, s)
			}
			what := "replaced"
			if created {
				what = "created"
			}
			_, err = fmt.Fprintf(e.stdout, "schedule %s %s, next fire %s\n", clean(s.Name), what, firstFire(s))
			return err
		},
	}
	o.bind(cmd, e)
	return cmd
}

func firstFire(s *api.Schedule) string {
	if len(s.NextFireTimes) == 0 {
		return "-"
	}
	return timestamp(s.NextFireTimes[0])
}

func newScheduleListCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the schedules",
		Long: `list prints every schedule by name: its definition, cron and time zone, its
overlap policy, whether it is paused, its next fire time and its last fire
(times in UTC). -o json prints the API's response.
` + clientHelp,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			list, err := c.ListSchedules(cmd.Context())
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, api.ListSchedulesResponse{Schedules: list})
			}
			if len(list) == 0 {
				fmt.Fprintln(e.stderr, "no schedules")
				return nil
			}
			tw := newTable(e.stdout)
			fmt.Fprintln(tw, "NAME\tDEFINITION\tCRON\tTIMEZONE\tOVERLAP\tPAUSED\tNEXT FIRE\tLAST FIRE")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%t\t%s\t%s\n", clean(s.Name), clean(s.Definition), clean(s.Cron),
					clean(s.Timezone), clean(s.Overlap), s.Paused, firstFire(&s), lastFire(&s))
			}
			return tw.Flush()
		},
	}
	o.bind(cmd, e)
	return cmd
}

func lastFire(s *api.Schedule) string {
	if s.LastFireAt == nil {
		return "-"
	}
	return timestamp(*s.LastFireAt)
}

func newScheduleGetCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a schedule and its next fire times",
		Long: `get prints the schedule NAME and its next 5 fire times (in UTC and in the
schedule's time zone). -o json prints the API's response.
` + clientHelp,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			s, err := c.GetSchedule(cmd.Context(), args[0])
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, s)
			}
			return printSchedule(e, s)
		},
	}
	o.bind(cmd, e)
	return cmd
}

func printSchedule(e *env, s *api.Schedule) error {
	tw := newTable(e.stdout)
	fmt.Fprintf(tw, "name:\t%s\n", clean(s.Name))
	fmt.Fprintf(tw, "definition:\t%s\n", clean(s.Definition))
	fmt.Fprintf(tw, "cron:\t%s\n", clean(s.Cron))
	fmt.Fprintf(tw, "timezone:\t%s\n", clean(s.Timezone))
	fmt.Fprintf(tw, "input:\t%s\n", clean(string(s.Input)))
	fmt.Fprintf(tw, "overlap:\t%s\n", clean(s.Overlap))
	fmt.Fprintf(tw, "paused:\t%t\n", s.Paused)
	fmt.Fprintf(tw, "catchup_window:\t%s\n", clean(s.CatchupWindow))
	fmt.Fprintf(tw, "last fire:\t%s\n", lastFire(s))
	if s.LastInstanceID != "" {
		fmt.Fprintf(tw, "last instance:\t%s\n", clean(s.LastInstanceID))
	}
	if s.BufferedFireAt != nil {
		fmt.Fprintf(tw, "waiting fire:\t%s\n", timestamp(*s.BufferedFireAt))
	}
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil {
		loc = time.UTC
	}
	fmt.Fprintln(tw, "next fire times:\t")
	for _, t := range s.NextFireTimes {
		fmt.Fprintf(tw, "  %s\t%s\n", timestamp(t), t.In(loc).Format("2006-01-02 15:04:05 MST"))
	}
	return tw.Flush()
}

func newScheduleDeleteCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule (not the instances it started)",
		Long: `delete deletes the schedule NAME; the instances it started stay.
` + clientHelp,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.DeleteSchedule(cmd.Context(), args[0]); err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, map[string]string{"deleted": args[0]})
			}
			_, err = fmt.Fprintf(e.stdout, "schedule %s deleted\n", clean(args[0]))
			return err
		},
	}
	o.bind(cmd, e)
	return cmd
}

func newSchedulePauseCmd(e *env, pause bool) *cobra.Command {
	var o clientOptions
	use, short, long := "pause NAME", "Pause a schedule", `pause stops the schedule NAME from firing until it is resumed.`
	if !pause {
		use, short, long = "resume NAME", "Resume a paused schedule",
			`resume lets the schedule NAME fire again. The fire times it missed while
paused start if they are younger than its catch-up window; older ones are missed.`
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long + "\n" + clientHelp,
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			s, err := c.PauseSchedule(cmd.Context(), args[0], pause)
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, s)
			}
			state := "paused"
			if !s.Paused {
				state = "resumed, next fire " + firstFire(s)
			}
			_, err = fmt.Fprintf(e.stdout, "schedule %s %s\n", clean(s.Name), state)
			return err
		},
	}
	o.bind(cmd, e)
	return cmd
}

func newScheduleTriggerCmd(e *env) *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "trigger NAME",
		Short: "Start an instance of a schedule now",
		Long: `trigger starts an instance of the schedule NAME now, whatever its overlap
policy and even while it is paused, with the id NAME-<now in UTC to the second>,
and prints it. A second trigger in the same second is refused (HTTP 409).
` + clientHelp,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			inst, err := c.TriggerSchedule(cmd.Context(), args[0])
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, inst)
			}
			return printInstance(e.stdout, inst)
		},
	}
	o.bind(cmd, e)
	return cmd
}

func newScheduleBackfillCmd(e *env) *cobra.Command {
	var (
		o        clientOptions
		from, to string
	)
	cmd := &cobra.Command{
		Use:   "backfill NAME --from TIME --to TIME",
		Short: "Start the instances of a schedule's past fire times",
		Long: `backfill starts one instance per fire time of the schedule NAME in
[--from, --to] (RFC 3339 times; at most 1,000 fire times), each with its fire
time's id, so a repeated backfill starts nothing new. It prints the ids it
created and those that existed already.
` + clientHelp,
		Example: `  flowd schedule backfill nightly --from 2026-11-01T00:00:00Z --to 2026-11-25T00:00:00Z`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" || to == "" {
				return usageError("--from and --to are required")
			}
			f, err := time.Parse(time.RFC3339, from)
			if err != nil {
				return usageError("--from %q is not an RFC 3339 time such as 2026-11-25T04:00:00Z", from)
			}
			t, err := time.Parse(time.RFC3339, to)
			if err != nil {
				return usageError("--to %q is not an RFC 3339 time such as 2026-11-25T04:00:00Z", to)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			res, err := c.BackfillSchedule(cmd.Context(), args[0], f, t)
			if err != nil {
				return o.apiFailure(err)
			}
			if o.json() {
				return printJSON(e.stdout, res)
			}
			tw := newTable(e.stdout)
			fmt.Fprintln(tw, "INSTANCE\tRESULT")
			for _, id := range res.Created {
				fmt.Fprintf(tw, "%s\tcreated\n", clean(id))
			}
			for _, id := range res.Existing {
				fmt.Fprintf(tw, "%s\texisted\n", clean(id))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(e.stdout, "%d created, %d existed\n", len(res.Created), len(res.Existing))
			return err
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "first time of the range, RFC 3339 (included)")
	cmd.Flags().StringVar(&to, "to", "", "last time of the range, RFC 3339 (included)")
	o.bind(cmd, e)
	return cmd
}
