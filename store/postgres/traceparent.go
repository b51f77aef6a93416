package postgres

// nullText stores "" as NULL: an instance started outside any trace has
// no traceparent.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
