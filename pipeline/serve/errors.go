package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an error a request gets, in OpenAI's shape:
// {"error": {"message", "type", "code"}}.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    string `json:"code"`
	// RetryAfter, in seconds, is sent as Retry-After (429, 503).
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Message }

// Error types, as OpenAI names them.
const (
	typeInvalid   = "invalid_request_error"
	typeAuth      = "authentication_error"
	typeRateLimit = "rate_limit_error"
	typeServer    = "server_error"
)

func badRequest(code, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: typeInvalid, Code: code, Message: fmt.Sprintf(format, a...)}
}

// errBusy is the answer when a queue is full.
var errBusy = &apiError{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "queue_full",
	Message: "the server is busy: its queue is full; retry after the time in Retry-After", RetryAfter: 1}

// errClosing is the answer once the server is shutting down.
var errClosing = &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "shutting_down",
	Message: "the server is shutting down", RetryAfter: 1}

// writeError answers with err as JSON: an *apiError as it is, anything else
// as a 500 whose message is err's.
func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{Status: http.StatusInternalServerError, Type: typeServer, Code: "internal", Message: err.Error()}
	}
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	}
	writeJSON(w, ae.Status, map[string]*apiError{"error": ae})
}

// writeJSON answers with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"encoding the response failed","type":"server_error","code":"internal"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
