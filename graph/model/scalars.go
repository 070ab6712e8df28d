package model

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// The scalars every argument goes through (bound in gqlgen.yml), so that a value the API cannot
// take is refused here, once, as BAD_USER_INPUT naming the argument, and never reaches a
// resolver or Postgres: a time that is not RFC 3339, an Int64 that is not a whole number in
// range, a string holding NUL (Postgres stores no NUL in text or jsonb).

// InputError is an argument value that cannot be read. The error presenter names the argument
// (or input field) from the error's path.
type InputError struct{ Reason string }

func (e *InputError) Error() string { return e.Reason }

func inputError(format string, args ...any) error {
	return &InputError{Reason: fmt.Sprintf(format, args...)}
}

// describe names a value's JSON kind for an error message.
func describe(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return strconv.Quote(v)
	case json.Number:
		return string(v)
	case bool:
		return strconv.FormatBool(v)
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%v", v)
}

// MarshalTime writes a time as RFC 3339 with nanoseconds.
func MarshalTime(t time.Time) graphql.Marshaler { return graphql.MarshalTime(t) }

// UnmarshalTime reads an RFC 3339 time ("2026-01-02T15:04:05Z").
func UnmarshalTime(v any) (time.Time, error) {
	s, ok := v.(string)
	if !ok {
		return time.Time{}, inputError("must be a time as an RFC 3339 string such as \"2026-01-02T15:04:05Z\", not %s", describe(v))
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, inputError("%s is not a time: use RFC 3339 such as \"2026-01-02T15:04:05Z\"", describe(v))
	}
	return t, nil
}

// MarshalInt64 writes an Int64 as a JSON number.
func MarshalInt64(i int64) graphql.Marshaler { return graphql.MarshalInt64(i) }

// UnmarshalInt64 reads a whole number from -2^63 to 2^63-1, as a number or a decimal string.
func UnmarshalInt64(v any) (int64, error) {
	const msg = "must be a whole number from -9223372036854775808 to 9223372036854775807, not %s"
	switch v := v.(type) {
	case int:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case int64:
		return v, nil
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, inputError(msg, describe(v))
		}
		return n, nil
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, inputError(msg, describe(v))
		}
		return n, nil
	case float64:
		if v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
			return 0, inputError(msg, strconv.FormatFloat(v, 'g', -1, 64))
		}
		return int64(v), nil
	}
	return 0, inputError(msg, describe(v))
}

// MarshalString writes a string.
func MarshalString(s string) graphql.Marshaler { return graphql.MarshalString(s) }

// UnmarshalString reads a string that Postgres can store: no NUL character.
func UnmarshalString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", inputError("must be a string, not %s", describe(v))
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "", inputError("must not contain NUL characters (\\u0000)")
	}
	return s, nil
}
