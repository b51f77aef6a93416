// The step graph of a definition: cycle detection for validation, and the
// lookups the engine and tests use (steps by id, dependents, order). Which
// steps are ready is the engine's rule (engine/rules, join.go).

package workflow

import (
	"container/heap"
	"slices"
	"strings"
)

// validateCycles reports one cycle per strongly connected component of the
// dependency graph (self-dependencies are reported per step).
func (d *Definition) validateCycles(ps *problemList, index map[string]int) {
	n := len(d.Steps)
	// next[i]: the steps that depend on step i, in definition order.
	next := make([][]int, n)
	for j, s := range d.Steps {
		if index[s.ID] != j || s.ID == "" {
			continue // invalid or duplicate id: already reported
		}
		for _, dep := range s.DependsOn {
			if i, ok := index[dep]; ok && i != j && !slices.Contains(next[i], j) {
				next[i] = append(next[i], j)
			}
		}
	}
	for _, comp := range stronglyConnected(next) {
		if len(comp) < 2 {
			continue
		}
		cycle := shortestCycle(next, comp)
		names := make([]string, len(cycle))
		for k, i := range cycle {
			names[k] = d.Steps[i].ID
		}
		ps.add("steps", "cycle: "+strings.Join(names, " → ")+" (each step depends on the one before it)")
	}
}

// stronglyConnected returns the strongly connected components of the graph
// (Tarjan), each sorted, ordered by their smallest member.
func stronglyConnected(next [][]int) [][]int {
	n := len(next)
	idx := make([]int, n)
	low := make([]int, n)
	on := make([]bool, n)
	for i := range idx {
		idx[i] = -1
	}
	var comps [][]int
	var st []int
	counter := 0
	var visit func(v int)
	visit = func(v int) {
		idx[v], low[v] = counter, counter
		counter++
		st = append(st, v)
		on[v] = true
		for _, w := range next[v] {
			if idx[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], idx[w])
			}
		}
		if low[v] == idx[v] {
			var comp []int
			for {
				w := st[len(st)-1]
				st = st[:len(st)-1]
				on[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			slices.Sort(comp)
			comps = append(comps, comp)
		}
	}
	for v := range n {
		if idx[v] < 0 {
			visit(v)
		}
	}
	slices.SortFunc(comps, func(a, b []int) int { return a[0] - b[0] })
	return comps
}

// shortestCycle returns a shortest cycle through the first member of the
// strongly connected component comp, starting and ending with it.
func shortestCycle(next [][]int, comp []int) []int {
	start := comp[0]
	in := make(map[int]bool, len(comp))
	for _, v := range comp {
		in[v] = true
	}
	parent := map[int]int{start: -1}
	queue := []int{start}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range next[v] {
			if w == start {
				var path []int
				for u := v; u != -1; u = parent[u] {
					path = append(path, u)
				}
				slices.Reverse(path)
				return append(path, start)
			}
			if _, seen := parent[w]; !seen && in[w] {
				parent[w] = v
				queue = append(queue, w)
			}
		}
	}
	return []int{start, start} // unreachable for a real component
}

// ancestorSearch answers "is step v an ancestor of step i?" for one step i at
// a time. The depth-first walk over the dependencies is resumed only as far as
// each question needs, so a step using its direct dependencies does not walk
// the whole graph above it.
type ancestorSearch struct {
	deps  [][]int // deps[i]: the indexes of the known dependencies of step i
	seen  []int   // seen[v] == gen: v is a known ancestor of the current step
	gen   int
	stack []int
}

func (a *ancestorSearch) start(i int) {
	a.gen++
	a.stack = append(a.stack[:0], a.deps[i]...)
}

func (a *ancestorSearch) has(v int) bool {
	for a.seen[v] != a.gen && len(a.stack) > 0 {
		u := a.stack[len(a.stack)-1]
		a.stack = a.stack[:len(a.stack)-1]
		if a.seen[u] == a.gen {
			continue
		}
		a.seen[u] = a.gen
		a.stack = append(a.stack, a.deps[u]...)
	}
	return a.seen[v] == a.gen
}

// Step returns the step with the given id.
func (d *Definition) Step(id string) (*Step, bool) {
	for i := range d.Steps {
		if d.Steps[i].ID == id {
			return &d.Steps[i], true
		}
	}
	return nil, false
}

// HasStep reports whether d has a step with the given id; it fits the stepIDs
// argument of CompileTemplate.
func (d *Definition) HasStep(id string) bool {
	_, ok := d.Step(id)
	return ok
}

// Roots returns the ids of the steps without dependencies, in definition order.
func (d *Definition) Roots() []string {
	var ids []string
	for _, s := range d.Steps {
		if len(s.DependsOn) == 0 {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// Dependents returns the ids of the steps that depend directly on id, in
// definition order.
func (d *Definition) Dependents(id string) []string {
	var ids []string
	for _, s := range d.Steps {
		if slices.Contains(s.DependsOn, id) {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// TopoOrder returns every step id such that each step comes after all its
// dependencies; among the steps that could come next, the earliest defined
// wins, so the order is stable. Steps on a cycle or depending on an unknown
// step (both rejected by Validate) are left out.
func (d *Definition) TopoOrder() []string {
	n := len(d.Steps)
	index := make(map[string]int, n)
	for i, s := range d.Steps {
		if _, dup := index[s.ID]; !dup {
			index[s.ID] = i
		}
	}
	waiting := make([]int, n) // unmet dependencies of each step
	next := make([][]int, n)  // the steps that depend on each step
	for j, s := range d.Steps {
		for _, dep := range s.DependsOn {
			i, ok := index[dep]
			if !ok || index[s.ID] != j {
				waiting[j] = -1 // never ready: an unknown dependency or a duplicate id
				break
			}
			waiting[j]++
			next[i] = append(next[i], j)
		}
	}
	// ready is a min-heap of step indexes: the earliest defined comes first.
	ready := &intHeap{}
	for j := range n {
		if waiting[j] == 0 && index[d.Steps[j].ID] == j {
			heap.Push(ready, j)
		}
	}
	order := make([]string, 0, n)
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		order = append(order, d.Steps[i].ID)
		for _, j := range next[i] {
			if waiting[j] > 0 {
				if waiting[j]--; waiting[j] == 0 {
					heap.Push(ready, j)
				}
			}
		}
	}
	return order
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Ancestors returns the ids of every step that id depends on, directly or
// transitively. It contains id itself only if id is on a cycle.
func (d *Definition) Ancestors(id string) map[string]bool {
	deps := make(map[string][]string, len(d.Steps))
	for _, s := range d.Steps {
		if _, dup := deps[s.ID]; !dup {
			deps[s.ID] = s.DependsOn
		}
	}
	seen := map[string]bool{}
	stack := slices.Clone(deps[id])
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[v] {
			continue
		}
		seen[v] = true
		stack = append(stack, deps[v]...)
	}
	return seen
}
