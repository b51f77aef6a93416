package sw

// Abort ends the workflow with e from outside the machine: a limit of the
// engine that runs it (too many versions, too many descendants, a state
// too large to store) was reached. Unlike a fault the document raises, no
// try/catch sees it, since catching it would only run into the limit
// again. Every pending item and frame is dropped, and the runtime keeps
// its context: the engine withdraws the items' work.
func (rt *Runtime) Abort(e *Error) {
	rt.Items = map[string]Item{}
	rt.Waits = map[string]Waiting{}
	rt.Frames = map[string]*Frame{}
	rt.Done, rt.Output = false, nil
	rt.Fault = e
}
