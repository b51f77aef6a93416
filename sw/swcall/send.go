package swcall

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/flowd/flowd/internal/outbound"
)

// MaxResponseBody bounds the response body a call keeps: a larger 2xx
// answer is a communication error rather than a workflow state that grows
// without limit.
const MaxResponseBody = 1 << 20

// outgoing is a built request, before it is sent.
type outgoing struct {
	method string
	uri    string
	header http.Header
	body   []byte
	basic  *BasicAuth
}

// send performs out and shapes a 2xx answer per output.
func send(ctx context.Context, client *http.Client, out *outgoing, output string) (json.RawMessage, error) {
	res, body, err := exchange(ctx, client, out, MaxResponseBody)
	if err != nil {
		return nil, err
	}
	switch output {
	case OutputRaw:
		return json.Marshal(base64.StdEncoding.EncodeToString(body))
	case OutputResponse:
		return responseOutput(out, res, body)
	}
	return content(res.Header, body)
}

// exchange sends out and reads at most limit bytes of a 2xx body. Non-2xx,
// transport failures and an oversized body are DSL errors.
func exchange(ctx context.Context, client *http.Client, out *outgoing, limit int64) (*http.Response, []byte, error) {
	var body io.Reader
	if out.body != nil {
		body = bytes.NewReader(out.body)
	}
	req, err := http.NewRequestWithContext(ctx, out.method, out.uri, body)
	if err != nil {
		return nil, nil, failure(TypeConfiguration, http.StatusBadRequest, "cannot build %s %s: %s", out.method, out.uri, err.Error())
	}
	req.Header = out.header.Clone()
	if out.basic != nil {
		req.SetBasicAuth(out.basic.Username, out.basic.Password)
	}
	res, err := client.Do(req)
	if err != nil {
		return nil, nil, transportFailure(ctx, out, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, nil, transportFailure(ctx, out, err)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		detail := fmt.Sprintf("%s %s answered %s", out.method, out.uri, res.Status)
		if excerpt := strings.TrimSpace(strings.ToValidUTF8(string(raw[:min(len(raw), 200)]), "?")); excerpt != "" {
			detail += ": " + excerpt
		}
		return nil, nil, failure(TypeCommunication, res.StatusCode, "%s", detail)
	}
	if int64(len(raw)) > limit {
		return nil, nil, failure(TypeCommunication, http.StatusInternalServerError, "%s %s answered a body larger than %d bytes", out.method, out.uri, limit)
	}
	return res, raw, nil
}

// transportFailure classifies a failed exchange: a connection the
// outbound policy refused is a configuration error (status 403: the
// server's configuration forbids it, so retrying cannot help, and a `try`
// that retries communication errors does not retry it); a deadline (ctx's
// or the client's timeout) is a timeout error; anything else a
// communication error.
func transportFailure(ctx context.Context, out *outgoing, err error) error {
	if refused := outbound.Refused(err, out.method, out.uri); refused != nil {
		return failure(TypeConfiguration, http.StatusForbidden, "%s", refused.Error())
	}
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return failure(TypeTimeout, http.StatusRequestTimeout, "%s %s timed out: %s", out.method, out.uri, err.Error())
	}
	return failure(TypeCommunication, http.StatusInternalServerError, "%s %s failed: %s", out.method, out.uri, err.Error())
}

// content is the body as the task sees it: decoded when the answer says it
// is JSON (application/json or any +json type) and parses, else the text as
// a JSON string, or base64 when it is not valid UTF-8 (binary cannot be a
// string). An empty body is null.
func content(header http.Header, body []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return json.RawMessage("null"), nil
	}
	if isJSON(header.Get("Content-Type")) && json.Valid(body) {
		return json.RawMessage(bytes.TrimSpace(body)), nil
	}
	if utf8.Valid(body) {
		return json.Marshal(string(body))
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(body))
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// responseOutput is the `response` output: the request as sent (method in
// lower case as the DSL writes it, the URI, the headers without
// Authorization, which must not be copied into workflow data), the status,
// the answer's headers and its content. Header names are Go's canonical form
// (Content-Type); a header with several values is joined with ", ".
func responseOutput(out *outgoing, res *http.Response, body []byte) (json.RawMessage, error) {
	c, err := content(res.Header, body)
	if err != nil {
		return nil, err
	}
	sent := out.header.Clone()
	sent.Del("Authorization")
	return json.Marshal(struct {
		Request struct {
			Method  string            `json:"method"`
			URI     string            `json:"uri"`
			Headers map[string]string `json:"headers"`
		} `json:"request"`
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Content    json.RawMessage   `json:"content"`
	}{
		Request: struct {
			Method  string            `json:"method"`
			URI     string            `json:"uri"`
			Headers map[string]string `json:"headers"`
		}{strings.ToLower(out.method), out.uri, flatten(sent)},
		StatusCode: res.StatusCode,
		Headers:    flatten(res.Header),
		Content:    c,
	})
}

func flatten(h http.Header) map[string]string {
	m := make(map[string]string, len(h))
	for name, values := range h {
		m[http.CanonicalHeaderKey(name)] = strings.Join(values, ", ")
	}
	return m
}
