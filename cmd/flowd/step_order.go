package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/flowd/flowd/client"
	"github.com/flowd/flowd/engine"
	"github.com/flowd/flowd/workflow"
)

// definitionGraph is the order of the steps of the revision inst was started
// from (graphOrder), or nil when there is none to read: a free-form instance,
// a code or Serverless Workflow definition, or a revision deleted since. The
// instance is shown either way, so a failed read only loses the order.
func definitionGraph(ctx context.Context, c *client.Client, inst *workflow.Instance) []string {
	if inst.Definition == "" || inst.DefinitionRevision < 1 {
		return nil
	}
	info, err := c.GetDefinition(ctx, inst.Definition, inst.DefinitionRevision)
	if err != nil {
		return nil
	}
	def, err := engine.DefinitionFromAPI(info)
	if err != nil || def.Definition == nil {
		return nil
	}
	return graphOrder(def.Definition.Steps)
}

// graphOrder lists the steps so that each comes after the steps it depends
// on, in the order the definition lists them where the graph leaves a
// choice: the order a reader of the definition expects.
func graphOrder(steps []workflow.Step) []string {
	done := make(map[string]bool, len(steps))
	order := make([]string, 0, len(steps))
	for len(order) < len(steps) {
		progressed := false
		for _, s := range steps {
			if done[s.ID] || !allDone(s.DependsOn, done) {
				continue
			}
			done[s.ID] = true
			order = append(order, s.ID)
			progressed = true
			break // the earliest ready step first, then look again from the top
		}
		if !progressed {
			// A cycle (never stored: validation rejects it): the rest
			// in definition order.
			for _, s := range steps {
				if !done[s.ID] {
					done[s.ID] = true
					order = append(order, s.ID)
				}
			}
		}
	}
	return order
}

func allDone(ids []string, done map[string]bool) bool {
	for _, id := range ids {
		if !done[id] {
			return false
		}
	}
	return true
}

// stepOrder is the order steps are listed in: those of graph (the
// definition's steps in graph order) first, then a code workflow's entries
// as they were recorded (their seq), then the others by id, numbers in them
// compared as numbers (a Serverless Workflow instance's sw-2 before sw-10).
func stepOrder(steps map[string]*workflow.StepState, graph []string) []string {
	rank := make(map[string]int, len(graph))
	for i, id := range graph {
		rank[id] = i + 1
	}
	seq := func(id string) int {
		var n int
		if st := steps[id]; st != nil {
			_ = json.Unmarshal(st.Extra["seq"], &n)
		}
		return n
	}
	ids := make([]string, 0, len(steps))
	for id := range steps {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		ra, rb := rank[a], rank[b]
		switch {
		case ra > 0 && rb > 0:
			return ra - rb
		case ra > 0:
			return -1
		case rb > 0:
			return 1
		}
		if sa, sb := seq(a), seq(b); sa != sb {
			return sa - sb
		}
		return naturalCompare(a, b)
	})
	return ids
}

// naturalCompare orders strings with the runs of digits in them compared
// by value: "sw-2" < "sw-10".
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, _ := strconv.ParseUint(a[:da], 10, 64)
			nb, _ := strconv.ParseUint(b[:db], 10, 64)
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitRun(s string) int {
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i < 0 {
		return len(s)
	}
	return i
}
