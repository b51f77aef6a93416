package swtest

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Pet is a petstore pet as the stub serves it.
type Pet struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"`
}

// Pets are the stub petstore's pets, by id.
var Pets = []Pet{
	{ID: 1, Name: "Milou", Status: "available"},
	{ID: 2, Name: "Rantanplan", Status: "available"},
	{ID: 3, Name: "Idefix", Status: "pending"},
	{ID: 4, Name: "Snoopy", Status: "sold"},
}

// routes are the stubbed endpoints of petstore.swagger.io and httpbin.org.
func routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/swagger.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(PetstoreSwagger))
	})
	mux.HandleFunc("GET /v2/pet/findByStatus", findPetsByStatus)
	mux.HandleFunc("GET /v2/pet/{petId}", getPetByID)
	// The real petstore has no such operation: it answers 404, which the
	// CTK's try scenarios rely on.
	mux.HandleFunc("GET /v2/pet/getPetByName/{name}", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, petstoreError{Code: 404, Type: "unknown", Message: "not found"})
	})
	mux.HandleFunc("GET /basic-auth/{user}/{password}", basicAuth)
	mux.HandleFunc("/anything", anything)
	mux.HandleFunc("/anything/{rest...}", anything)
	return mux
}

type petstoreError struct {
	Code    int    `json:"code"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// findPetsByStatus answers the pets whose status is one of the status
// parameters (repeated or comma-separated, as the petstore accepts both).
func findPetsByStatus(w http.ResponseWriter, r *http.Request) {
	wanted := map[string]bool{}
	for _, v := range r.URL.Query()["status"] {
		for _, s := range strings.Split(v, ",") {
			wanted[s] = true
		}
	}
	found := []Pet{}
	for _, p := range Pets {
		if wanted[p.Status] {
			found = append(found, p)
		}
	}
	writeJSON(w, http.StatusOK, found)
}

func getPetByID(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("petId"), 10, 64)
	if err == nil {
		for _, p := range Pets {
			if p.ID == id {
				writeJSON(w, http.StatusOK, p)
				return
			}
		}
	}
	writeJSON(w, http.StatusNotFound, petstoreError{Code: 1, Type: "error", Message: "Pet not found"})
}

// basicAuth is httpbin's: 200 when the request's basic credentials are the
// path's user and password, else 401 with a challenge.
func basicAuth(w http.ResponseWriter, r *http.Request) {
	user, password, ok := r.BasicAuth()
	if !ok || user != r.PathValue("user") || password != r.PathValue("password") {
		w.Header().Set("WWW-Authenticate", `Basic realm="Fake Realm"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"authenticated": true, "user": user})
}

// anything is httpbin's echo: the request's method, URL, query, headers and
// body (parsed when it is JSON).
func anything(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var parsed any
	if json.Valid(body) {
		parsed = json.RawMessage(body)
	}
	args := map[string]string{}
	for k, v := range r.URL.Query() {
		args[k] = strings.Join(v, ",")
	}
	headers := map[string]string{}
	for k, v := range r.Header {
		headers[k] = strings.Join(v, ", ")
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"method":  r.Method,
		"url":     r.URL.String(),
		"args":    args,
		"headers": headers,
		"data":    string(body),
		"json":    parsed,
	})
}
