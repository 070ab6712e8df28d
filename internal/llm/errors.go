package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Class says what to do about a failure.
type Class string

// Failure classes.
const (
	// Transient failures (rate limits, overload, 5xx, timeouts, streams cut before any output)
	// are retried with backoff, honouring RetryAfter.
	Transient Class = "TRANSIENT"
	// Recoverable failures are retried with the error added to the next attempt's prompt.
	Recoverable Class = "RECOVERABLE"
	// Terminal failures (bad credentials, invalid requests, budget exceeded) end the run now.
	Terminal Class = "TERMINAL"
)

// Error is a classified model failure.
type Error struct {
	Class      Class
	Provider   string
	Status     int           // HTTP status, 0 when there was none
	RetryAfter time.Duration // from Retry-After (or the provider's equivalent), 0 when absent
	Message    string
	// ContextLength is true when the request exceeded the model's context window.
	ContextLength bool
	// Emitted is true when part of the reply had already streamed when the call failed.
	Emitted bool
	Err     error
}

// Error implements error: the provider, the HTTP status and the message, as a person reads
// them in a run's error ("anthropic 401: invalid x-api-key"). The class is not in it: it is
// the run's failureClass.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Provider)
	if e.Status != 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d", e.Status)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if e.Err != nil && e.Message == "" {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Classify returns err as an *Error, classifying errors that are not one yet: context
// cancellation is terminal for the call (the caller decides what cancellation means), network
// errors and timeouts are transient, anything unknown is transient.
func Classify(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &Error{Class: Terminal, Message: "cancelled", Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Class: Transient, Message: "timed out", Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return &Error{Class: Transient, Message: "stream cut: " + err.Error(), Err: err}
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return &Error{Class: Transient, Message: "network: " + err.Error(), Err: err}
	}
	return &Error{Class: Transient, Message: err.Error(), Err: err}
}

// FromHTTP classifies an HTTP error answer of a provider.
func FromHTTP(provider string, status int, header http.Header, message string, cause error) *Error {
	e := &Error{Provider: provider, Status: status, Message: message, Err: cause, RetryAfter: RetryAfter(header)}
	lower := strings.ToLower(message)
	switch {
	case status == http.StatusTooManyRequests, status == http.StatusRequestTimeout, status == 529, status >= 500:
		e.Class = Transient
	case status == http.StatusUnauthorized, status == http.StatusForbidden, status == http.StatusPaymentRequired:
		e.Class = Terminal
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge:
		if isContextLength(lower) {
			e.Class, e.ContextLength = Recoverable, true
		} else {
			e.Class = Terminal
		}
	case status == http.StatusConflict:
		e.Class = Transient
	default:
		e.Class = Terminal
	}
	return e
}

func isContextLength(msg string) bool {
	for _, s := range []string{"context length", "context_length", "context window", "prompt is too long", "maximum context", "too many tokens", "input is too long"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// RetryAfter reads Retry-After (seconds or an HTTP date) and the retry-after-ms extension.
func RetryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	if ms := h.Get("Retry-After-Ms"); ms != "" {
		if n, err := strconv.ParseFloat(ms, 64); err == nil && n > 0 {
			return time.Duration(n * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}
