package graph

import (
	"bytes"
	"context"
	"encoding"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/coder/websocket"
)

// wsImplementation adapts coder/websocket to gqlgen's WebSocket transport, as gqlgen's own
// CoderWebsocketImplementation does, with one difference: a protocol message is written around
// its payload, which is already JSON (each "next" carries gqlgen's marshalled response), instead
// of going through json.Marshal, which would check and copy every byte of the payload again. A
// run's event delivered to many subscribers is one such message per subscriber. The socket under
// the WebSocket is written behind (writeBehind), so that messages queued while one is being
// written go out in one system call.
type wsImplementation struct {
	AcceptOptions websocket.AcceptOptions
}

var _ transport.WebsocketImplementation = wsImplementation{}

// Accept upgrades the request, offering the transport's subprotocols.
func (w wsImplementation) Accept(rw http.ResponseWriter, r *http.Request, o transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	for k, vs := range o.ResponseHeader {
		for _, v := range vs {
			rw.Header().Add(k, v)
		}
	}
	opts := w.AcceptOptions
	opts.Subprotocols = slices.Clone(opts.Subprotocols)
	for _, p := range o.Subprotocols {
		if !slices.Contains(opts.Subprotocols, p) {
			opts.Subprotocols = append(opts.Subprotocols, p)
		}
	}
	if canHijack(rw) {
		rw = writeBehindHijacker{rw}
	}
	c, err := websocket.Accept(rw, r, &opts)
	if err != nil {
		return nil, err
	}
	return &wsConn{c: c}, nil
}

// wsConn is one accepted WebSocket.
type wsConn struct {
	c *websocket.Conn

	mu       sync.Mutex
	deadline *time.Timer   // the read deadline: the socket is closed when it fires
	closing  chan struct{} // set once WriteClose started the close handshake
}

var (
	_ transport.WebsocketConn          = (*wsConn)(nil)
	_ transport.WebsocketReadLimiter   = (*wsConn)(nil)
	_ transport.WebsocketReadDeadliner = (*wsConn)(nil)
)

// Close closes the socket at once, unless a close handshake (WriteClose) already owns that.
func (c *wsConn) Close() error {
	c.mu.Lock()
	c.stopDeadline()
	closing := c.closing != nil
	c.mu.Unlock()
	if closing {
		return nil
	}
	return c.c.CloseNow()
}

// NextReader reads the next message; a normal closure by the peer is ErrWebsocketClosed.
func (c *wsConn) NextReader() (int, io.Reader, error) {
	typ, data, err := c.c.Read(context.Background())
	if err != nil {
		switch websocket.CloseStatus(err) {
		case websocket.StatusNormalClosure, websocket.StatusNoStatusRcvd:
			return int(typ), nil, transport.ErrWebsocketClosed
		}
		return int(typ), nil, err
	}
	return int(typ), bytes.NewReader(data), nil
}

// WriteJSON writes v as a text message. The transport's protocol messages (a struct of Payload
// json.RawMessage, ID string and Type, a string type, in either subprotocol) are written field
// by field with the payload as it is: the transport made it with json.Marshal, or decoded it from
// the client's message (a ping's payload echoed in the pong), so it is valid JSON already.
// Anything else goes through json.Marshal.
func (c *wsConn) WriteJSON(v any) error {
	data, ok := envelope(v)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return err
		}
	}
	return c.c.Write(context.Background(), websocket.MessageText, data)
}

// envelope encodes a protocol message as encoding/json would ({"payload":...,"id":...,
// "type":...}, payload and id omitted when empty), except that the payload is written as it is
// (json.Marshal would compact it and escape HTML characters: the same value); ok is false for
// any other value.
func envelope(v any) (out []byte, ok bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct || !isEnvelope(rv.Elem().Type()) {
		return nil, false
	}
	rv = rv.Elem()
	payload, id, typ := rv.Field(0).Bytes(), rv.Field(1).String(), rv.Field(2).String()
	if m, ok := rv.Field(2).Interface().(encoding.TextMarshaler); ok {
		b, err := m.MarshalText()
		if err != nil {
			return nil, false
		}
		typ = string(b)
	}
	out = make([]byte, 0, len(payload)+len(id)+len(typ)+40)
	out = append(out, '{')
	if len(payload) > 0 {
		out = append(out, `"payload":`...)
		out = append(out, payload...)
		out = append(out, ',')
	}
	if id != "" {
		out = append(out, `"id":`...)
		out = appendString(out, id)
		out = append(out, ',')
	}
	out = append(out, `"type":`...)
	out = appendString(out, typ)
	return append(out, '}'), true
}

var rawMessage = reflect.TypeOf(json.RawMessage(nil))

// envelopeTypes caches isEnvelope's answer per type.
var envelopeTypes sync.Map

// isEnvelope reports whether t is shaped as the transport's protocol messages are: Payload
// json.RawMessage `json:"payload,omitempty"`, ID string `json:"id,omitempty"` and Type (a string
// type) `json:"type"`, then only unexported fields.
func isEnvelope(t reflect.Type) bool {
	if v, ok := envelopeTypes.Load(t); ok {
		return v.(bool)
	}
	want := []struct {
		name, tag string
		ok        func(reflect.Type) bool
	}{
		{"Payload", "payload,omitempty", func(ft reflect.Type) bool { return ft == rawMessage }},
		{"ID", "id,omitempty", func(ft reflect.Type) bool { return ft.Kind() == reflect.String }},
		{"Type", "type", func(ft reflect.Type) bool { return ft.Kind() == reflect.String }},
	}
	is := t.NumField() >= len(want)
	for i := 0; is && i < t.NumField(); i++ {
		f := t.Field(i)
		if i >= len(want) {
			is = !f.IsExported() // a field this encoding would leave out
			continue
		}
		is = f.Name == want[i].name && f.Tag.Get("json") == want[i].tag && want[i].ok(f.Type)
	}
	envelopeTypes.Store(t, is)
	return is
}

// appendString appends s as a JSON string. Ids and message types are short client-chosen or
// fixed ASCII strings; anything needing escapes goes through json.Marshal for its exact
// encoding.
func appendString(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(out, b...)
		}
	}
	return strconv.AppendQuote(out, s)
}

// WriteClose starts the close handshake in the background: the peer may never answer it, and
// the transport must not wait on that to finish its teardown.
func (c *wsConn) WriteClose(code int, reason string) error {
	c.mu.Lock()
	c.stopDeadline()
	if c.closing != nil {
		c.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	c.closing = done
	c.mu.Unlock()
	go func() {
		defer close(done)
		_ = c.c.Close(websocket.StatusCode(code), reason)
	}()
	return nil
}

// Subprotocol is the negotiated subprotocol.
func (c *wsConn) Subprotocol() string { return c.c.Subprotocol() }

// SetReadLimit bounds a message's size.
func (c *wsConn) SetReadLimit(limit int64) { c.c.SetReadLimit(limit) }

// SetReadDeadline closes the socket at deadline unless it is moved or cleared (zero) first.
func (c *wsConn) SetReadDeadline(deadline time.Time) error {
	c.mu.Lock()
	c.stopDeadline()
	if !deadline.IsZero() {
		if d := time.Until(deadline); d > 0 {
			c.deadline = time.AfterFunc(d, func() { _ = c.c.CloseNow() })
			deadline = time.Time{}
		}
	}
	c.mu.Unlock()
	if !deadline.IsZero() {
		return c.c.CloseNow() // already past
	}
	return nil
}

// stopDeadline stops the read deadline's timer; c.mu is held.
func (c *wsConn) stopDeadline() {
	if c.deadline != nil {
		c.deadline.Stop()
		c.deadline = nil
	}
}
