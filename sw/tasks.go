package sw

// TaskCount is the number of tasks of the document, at every depth (the
// tasks of do, for, try, catch and fork branches included): what a list of
// definitions shows as its steps.
func (w *Workflow) TaskCount() int { return len(w.tasks) }
