// fork: branches run at once, each a thread of frames; with compete the
// first to finish wins and the others are withdrawn.

package sw

import "encoding/json"

func (x *exec) beginFork(f *Frame, n *node, in any) {
	f.Input = toRaw(in)
	f.Outputs = make([]json.RawMessage, len(n.branches))
	f.Received = make([]bool, len(n.branches))
	x.startTimeout(f, n)
	for i, b := range n.branches {
		if x.ended || x.rt.Frames[f.ID] == nil {
			return // a branch that finished at once ended the fork
		}
		x.enter(f, b, in, i)
	}
}

// branchDone records branch i's output; the fork finishes with the winner's
// output (compete) or, once every branch is done, with their outputs in
// branch order.
func (x *exec) branchDone(p *Frame, i int, out any) {
	n := x.task(p)
	if n.compete {
		x.removeBelow(p)
		x.finishComposite(p, out)
		return
	}
	p.Outputs[i] = toRaw(out)
	p.Received[i] = true
	all := make([]any, len(p.Outputs))
	for j, o := range p.Outputs {
		if !p.Received[j] {
			return
		}
		all[j] = x.fromRaw(o)
	}
	x.finishComposite(p, all)
}
