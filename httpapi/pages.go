package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/flowd/flowd/store"
	"github.com/flowd/flowd/workflow"
)

// Large responses must not pin memory per slow client: the list and history
// routes read the store in chunks of rows, encode row by row straight to the
// connection, and end a page early, with its continuation (next_cursor,
// next_since), once the encoded rows reach the page byte bound. So a
// response holds at most one chunk of rows in memory, whatever limit asked
// for; and a client that does not read its page within the request timeout
// is disconnected (a write deadline), so even that chunk is not held for
// ever.

// DefaultMaxPageBytes is the default of Config.MaxPageBytes.
const DefaultMaxPageBytes = 8 << 20

// Chunks: the first is firstChunk rows; each next one as many rows as the
// rows so far suggest fit in chunkBytes, from 1 to maxChunk. Small rows are
// read 50 at a time; rows of megabytes (large states) one or a few at a time.
const (
	firstChunk = 10
	maxChunk   = 50
	chunkBytes = 1 << 20
)

// nextChunk is the size of the next chunk after rows rows of bytes bytes.
func nextChunk(rows, bytes int) int {
	if rows == 0 {
		return firstChunk
	}
	avg := max(bytes/rows, 1)
	return max(1, min(maxChunk, chunkBytes/avg))
}

// DefaultHistoryLimit and MaxHistoryLimit bound the limit of GET …/history.
const (
	DefaultHistoryLimit = 1000
	MaxHistoryLimit     = 1000
)

// pageWriter writes a JSON object {"<field>": [items…], <tail>} item by
// item. Nothing is written before the first item or end, so until then an
// error can still be answered with its own status.
type pageWriter struct {
	w       http.ResponseWriter
	r       *http.Request
	field   string
	max     int // byte bound of the items
	bytes   int
	items   int
	started bool
	err     error // the first write error: the client is gone
}

func (s *Server) newPageWriter(w http.ResponseWriter, r *http.Request, field string) *pageWriter {
	return &pageWriter{w: w, r: r, field: field, max: s.cfg.MaxPageBytes}
}

func (p *pageWriter) start() {
	if p.started {
		return
	}
	p.started = true
	if d, ok := p.r.Context().Deadline(); ok {
		// Not every ResponseWriter can (httptest's recorder cannot): then
		// there is no deadline to set.
		_ = http.NewResponseController(p.w).SetWriteDeadline(d)
	}
	p.w.Header().Set("Content-Type", "application/json")
	p.w.WriteHeader(http.StatusOK)
	p.write([]byte(`{"` + p.field + `":[`))
}

func (p *pageWriter) write(b []byte) {
	if p.err == nil {
		_, p.err = p.w.Write(b)
	}
}

// add encodes v as the next item.
func (p *pageWriter) add(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	p.start()
	if p.items > 0 {
		p.write([]byte{','})
	}
	p.write(b)
	p.items++
	p.bytes += len(b)
	return p.err
}

// full reports whether the page holds its byte bound: it then ends before
// its next item. A page has at least one item, however large.
func (p *pageWriter) full() bool { return p.items > 0 && p.bytes >= p.max }

// end closes the array and the object; tail is the continuation member
// (cursorTail, sinceTail), or "" on the last page.
func (p *pageWriter) end(tail string) {
	p.start()
	p.write([]byte("]" + tail + "}\n"))
}

// cursorTail is the next_cursor member of a list page ("" for none).
func cursorTail(cursor string) string {
	if cursor == "" {
		return ""
	}
	b, _ := json.Marshal(cursor)
	return `,"next_cursor":` + string(b)
}

// sinceTail is the next_since member of a history page.
func sinceTail(next int64) string { return `,"next_since":` + strconv.FormatInt(next, 10) }

// endEarly ends a page that a store error cut short after its first
// chunk: the client gets the rows so far and a continuation from where
// they stop, and meets the error, if it lasts, on its next request.
func (s *Server) endEarly(r *http.Request, p *pageWriter, tail string, err error) {
	s.log.WarnContext(r.Context(), "page ended early by an error", "err", err, "request_id", requestID(r.Context()))
	p.end(tail)
}

func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.ListParams{Definition: q.Get("definition"), Cursor: q.Get("cursor")}
	if q.Has("id_prefix") {
		v := q.Get("id_prefix")
		if err := workflow.ValidateIDPrefix(v); err != nil {
			s.fail(w, r, httpError(http.StatusBadRequest, err.Error()))
			return
		}
		p.IDPrefix = v
	}
	if q.Has("parent") {
		v := q.Get("parent")
		if err := workflow.ValidateInstanceID(v); err != nil {
			s.fail(w, r, httpError(http.StatusBadRequest, "parent: "+err.Error()))
			return
		}
		p.Parent = v
	}
	if q.Has("rerun_of") {
		v := q.Get("rerun_of")
		if err := workflow.ValidateInstanceID(v); err != nil {
			s.fail(w, r, httpError(http.StatusBadRequest, "rerun_of: "+err.Error()))
			return
		}
		p.RerunOf = v
	}
	if v := q.Get("status"); v != "" {
		st, err := workflow.ParseStatus(v)
		if err != nil {
			s.fail(w, r, httpError(http.StatusBadRequest, err.Error()))
			return
		}
		p.Status = st
	}
	if err := listFilters(q, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxListLimit {
			s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("limit must be an integer from 1 to %d, not %q", store.MaxListLimit, v)))
			return
		}
		p.Limit = n
	}
	if err := p.Normalize(); err != nil {
		s.fail(w, r, err)
		return
	}
	pw := s.newPageWriter(w, r, "workflows")
	remaining, cursor := p.Limit, p.Cursor
	for {
		chunk := p
		chunk.Limit, chunk.Cursor = min(remaining, nextChunk(pw.items, pw.bytes)), cursor
		page, err := s.cfg.Store.List(r.Context(), chunk)
		if err != nil && !pw.started {
			s.fail(w, r, err)
			return
		}
		if err != nil {
			s.endEarly(r, pw, cursorTail(cursor), err)
			return
		}
		for i, inst := range page.Instances {
			if pw.full() {
				pw.end(cursorTail(cursor)) // inst and maybe more follow
				return
			}
			inst.ShowError()
			if err := pw.add(inst); err != nil {
				return // the client is gone
			}
			page.Instances[i] = nil // written: free while the next rows are
			cursor = store.EncodeCursor(store.Cursor{CreatedAt: inst.CreatedAt, ID: inst.ID})
			remaining--
		}
		if page.NextCursor == "" {
			pw.end("")
			return
		}
		if remaining == 0 || pw.full() {
			pw.end(cursorTail(cursor))
			return
		}
	}
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since int64
	if v := q.Get("since"); q.Has("since") {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("since must be a version: an integer from 0 on, not %q", v)))
			return
		}
		since = n
	}
	limit := DefaultHistoryLimit
	if v := q.Get("limit"); q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxHistoryLimit {
			s.fail(w, r, httpError(http.StatusBadRequest, fmt.Sprintf("limit must be an integer from 1 to %d, not %q", MaxHistoryLimit, v)))
			return
		}
		limit = n
	}
	id := r.PathValue("id")
	pw := s.newPageWriter(w, r, "versions")
	remaining, next := limit, since
	for {
		// The last chunk reads one row more than it writes, to learn
		// whether a next page exists.
		want := min(remaining, nextChunk(pw.items, pw.bytes))
		ask := want
		if want == remaining {
			ask++
		}
		versions, err := s.cfg.Store.History(r.Context(), id, next, ask)
		if err != nil && !pw.started {
			s.fail(w, r, err)
			return
		}
		if err != nil {
			s.endEarly(r, pw, sinceTail(next), err)
			return
		}
		for i, v := range versions {
			if i == want || pw.full() {
				pw.end(sinceTail(next)) // v and maybe more follow
				return
			}
			if err := pw.add(v); err != nil {
				return // the client is gone
			}
			versions[i] = store.HistoryEntry{} // written: free while the next rows are
			next = v.Version + 1
			remaining--
		}
		if len(versions) < ask {
			pw.end("")
			return
		}
	}
}
