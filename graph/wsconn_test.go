package graph

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// msgType is a protocol message type as the transport's are: a string type with MarshalText.
type msgType string

func (t msgType) MarshalText() ([]byte, error) { return []byte("t-" + string(t)), nil }

// protoMsg has the shape of the transport's protocol messages.
type protoMsg struct {
	Payload json.RawMessage `json:"payload,omitempty"`
	ID      string          `json:"id,omitempty"`
	Type    msgType         `json:"type"`
	noOp    bool
}

// envelope writes what json.Marshal writes for the transport's messages, without re-encoding the
// payload, and leaves every other value to json.Marshal.
func TestEnvelopeMatchesJSONMarshal(t *testing.T) {
	for _, m := range []*protoMsg{
		{Payload: json.RawMessage(`{"data":{"runEvents":{"seq":1,"data":{"text":"a\u003cb"}}}}`), ID: "1", Type: "next"},
		{ID: "sub-2", Type: "complete"},
		{Type: "connection_ack"},
		{Payload: json.RawMessage(`[{"message":"boom"}]`), ID: `quote"and\back`, Type: "error"},
		{Payload: json.RawMessage(`{}`), ID: "<&>", Type: "pong"},
		{Payload: json.RawMessage(`null`), ID: "é", Type: "next"},
		{ID: "tab\there", Type: "next"},
	} {
		want, err := json.Marshal(m)
		require.NoError(t, err)
		got, ok := envelope(m)
		require.True(t, ok, "%+v", m)
		require.JSONEq(t, string(want), string(got))
		require.Equal(t, string(want), string(got), "byte for byte")
	}
	for _, v := range []any{
		map[string]string{"type": "next"},
		struct{ Payload, ID, Type string }{"a", "b", "c"},
		&struct {
			Payload json.RawMessage
			ID      string
			Type    string
			Extra   string
		}{},
		&struct {
			Payload json.RawMessage `json:"payload"` // no omitempty: an empty payload would be null
			ID      string          `json:"id,omitempty"`
			Type    msgType         `json:"type"`
		}{ID: "1", Type: "next"},
		&struct {
			Payload json.RawMessage `json:"payload,omitempty"`
			ID      string          `json:"id,omitempty"`
			Type    msgType         `json:"kind"`
		}{ID: "1", Type: "next"},
		(*protoMsg)(nil),
		"string",
	} {
		_, ok := envelope(v)
		require.False(t, ok, "%T goes through json.Marshal", v)
	}
}
