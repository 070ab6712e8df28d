// Package apperr is agentry's one error type: a machine-readable code, a message safe to show the
// caller, and optional details. Domains return it; graph/errors.go is the only place that maps it
// onto the transport (GraphQL extensions.code).
package apperr

import (
	"errors"
	"fmt"
)

// Code classifies an error for clients. The zero value is Internal.
type Code string

// The codes clients see in extensions.code.
const (
	Internal        Code = "INTERNAL"
	Unauthenticated Code = "UNAUTHENTICATED"
	Forbidden       Code = "FORBIDDEN"
	NotFound        Code = "NOT_FOUND"
	BadUserInput    Code = "BAD_USER_INPUT"
	BudgetExceeded  Code = "BUDGET_EXCEEDED"
	RateLimited     Code = "RATE_LIMITED"
	Conflict        Code = "CONFLICT"
)

// Error is an error with a code. Message is shown to the client as is; Fields adds structured
// details (for example the field and range of an invalid input) under extensions.
type Error struct {
	Code    Code
	Message string
	Fields  map[string]any
	// Err is the cause, logged but never shown to the client.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns an error with a code and a client-facing message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// With returns a copy of e carrying the extra field.
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Fields = make(map[string]any, len(e.Fields)+1)
	for k, v := range e.Fields {
		c.Fields[k] = v
	}
	c.Fields[key] = value
	return &c
}

// CodeOf returns the code of the first *Error in err's chain, or Internal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// NotFoundf is the answer for a missing object and for another tenant's object alike.
func NotFoundf(what string) *Error { return New(NotFound, "%s not found", what) }

// Invalid reports a bad input value naming the field.
func Invalid(field, format string, args ...any) *Error {
	return New(BadUserInput, "%s: %s", field, fmt.Sprintf(format, args...)).With("field", field)
}
