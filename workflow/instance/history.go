package instance

import "time"

// HistoryEntry is one version of an instance, as it was written. Actor is
// who asked for it: an API token's name, "engine", "anonymous", or
// "unknown" for versions written before actors were recorded.
type HistoryEntry struct {
	Version int64     `json:"version"`
	Status  Status    `json:"status"`
	State   State     `json:"state"`
	At      time.Time `json:"at"`
	Cause   string    `json:"cause"`
	Actor   string    `json:"actor"`
}
