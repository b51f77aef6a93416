package sw

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestSpecExamples parses every example of the specification (copied to
// testdata/examples): those using only supported constructs parse; the
// others fail naming the pointers of what is unsupported.
func TestSpecExamples(t *testing.T) {
	unsupported := map[string][]string{
		"accumulate-room-readings.yaml": {
			"/do/0/consumeReading/listen/to/all/0/correlate", "/do/0/consumeReading/listen/to/all/0/with/source",
			"/do/0/consumeReading/listen/to/all/1/correlate", "/do/0/consumeReading/listen/to/all/1/with/source",
		},
		"authentication-oauth2-secret.yaml":                    {"/do/0/getPet/with/endpoint/authentication/oauth2"},
		"authentication-oauth2.yaml":                           {"/do/0/getPet/with/endpoint/authentication/oauth2"},
		"authentication-oidc-secret.yaml":                      {"/do/0/getPet/with/endpoint/authentication/oidc"},
		"authentication-oidc.yaml":                             {"/do/0/getPet/with/endpoint/authentication/oidc"},
		"call-asyncapi-publish.yaml":                           {"/do/0/findPet/call"},
		"call-asyncapi-subscribe-consume-amount.yaml":          {"/do/0/getNotifications/call"},
		"call-asyncapi-subscribe-consume-forever-foreach.yaml": {"/do/0/getNotifications/call"},
		"call-asyncapi-subscribe-consume-until.yaml":           {"/do/0/getNotifications/call"},
		"call-asyncapi-subscribe-consume-while.yaml":           {"/do/0/getNotifications/call"},
		"call-custom-function-cataloged.yaml":                  {"/do/0/log/call"},
		"call-custom-function-inline.yaml":                     {"/do/0/getPet/call"},
		"call-grpc.yaml":                                       {"/do/0/greet/call"},
		"call-mcp.yaml":                                        {"/do/0/publishMessageToSlack/call"},
		"listen-to-all-read-envelope.yaml":                     {"/do/0/callDoctor/listen/to/all/0/with/data", "/do/0/callDoctor/listen/to/all/1/with/data"},
		"listen-to-all.yaml":                                   {"/do/0/callDoctor/listen/to/all/0/with/data", "/do/0/callDoctor/listen/to/all/1/with/data"},
		"listen-to-any-filter.yaml":                            {"/do/0/callDoctor/listen/to/any/0/with/data", "/do/0/callDoctor/listen/to/any/1/with/data"},
		"listen-to-any-forever-foreach.yaml":                   {"/do/0/listenToGossips/foreach", "/do/0/listenToGossips/listen/to/any"},
		"listen-to-any-until-condition.yaml":                   {"/do/0/callDoctor/listen/to/any"},
		"listen-to-any-until-consumed.yaml": {
			"/do/0/callDoctor/listen/to/any/0/with/data", "/do/0/callDoctor/listen/to/any/1/with/data", "/do/0/callDoctor/listen/to/until",
		},
		"listen-to-any.yaml":                       {"/do/0/callDoctor/listen/to/any"},
		"mock-service-extension.yaml":              {"/use/extensions"},
		"run-container-cleanup-always.yaml":        {"/do/0/runContainer/run"},
		"run-container-cleanup-eventually.yaml":    {"/do/0/runContainer/run"},
		"run-container-stdin-and-arguments.yaml":   {"/do/1/runContainer/run"},
		"run-container-with-name.yaml":             {"/do/0/runContainer/run"},
		"run-container-with-pull-policy.yaml":      {"/do/0/runContainer/run"},
		"run-container.yaml":                       {"/do/0/runContainer/run"},
		"run-return-all.yaml":                      {"/do/0/runContainer/run"},
		"run-return-code.yaml":                     {"/do/0/runContainer/run"},
		"run-return-none.yaml":                     {"/do/0/runContainer/run"},
		"run-return-stderr.yaml":                   {"/do/0/runContainer/run"},
		"run-script-with-stdin-and-arguments.yaml": {"/do/0/runScript/run"},
		"run-shell-stdin-and-arguments.yaml":       {"/do/1/runShell/run"},
		"schedule-cron.yaml":                       {"/schedule"},
		"schedule-event-driven.yaml":               {"/schedule"},
		"set-expression.yaml":                      {"/schedule"},
		"set.yaml":                                 {"/schedule"},
	}
	files, err := filepath.Glob("testdata/examples/*.yaml")
	if err != nil || len(files) < 60 {
		t.Fatalf("examples: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if !IsDocument(data) {
				t.Errorf("IsDocument = false")
			}
			w, err := Parse(data)
			want, bad := unsupported[name]
			if !bad {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if w.Name == "" || len(w.JSON) == 0 {
					t.Errorf("workflow %+v", w)
				}
				return
			}
			var ps *Problems
			if !errors.As(err, &ps) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse: %v, want problems at %v", err, want)
			}
			var got []string
			for _, p := range ps.List {
				got = append(got, p[:strings.Index(p, ": ")])
			}
			sort.Strings(got)
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("problems at %v, want %v\n%s", got, want, strings.Join(ps.List, "\n"))
			}
		})
	}
}
