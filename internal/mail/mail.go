// Package mail sends the emails agentry sends people (address verification, invitations,
// password resets) through a Sender: SMTP (AGENTRY_SMTP_URL), or, in development, the log.
// Production needs SMTP (config.Validate).
package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/smtp"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Message is one plain-text email.
type Message struct {
	To, Subject, Text string
}

// Sender delivers messages.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// Log is the development sender: it writes each message, link included, to the log instead of
// sending it.
type Log struct{ Log *slog.Logger }

// Send logs m.
func (l Log) Send(ctx context.Context, m Message) error {
	l.Log.InfoContext(ctx, "email (development: logged, not sent)", slog.String("to", m.To), slog.String("subject", m.Subject), slog.String("text", m.Text))
	return nil
}

// Discard drops every message: the sender of a program that runs agentry where nobody reads
// its mail (the bench).
type Discard struct{}

// Send drops m.
func (Discard) Send(context.Context, Message) error { return nil }

// SMTP sends through an SMTP server: STARTTLS when the server offers it (smtp://), TLS from
// the first byte (smtps://), PLAIN authentication when the URL has a user (net/smtp refuses to
// send a password over an unencrypted connection to another host).
type SMTP struct {
	addr, host, from string
	implicitTLS      bool
	auth             smtp.Auth
	timeout          time.Duration
}

// ParseSMTPURL reads AGENTRY_SMTP_URL: smtp://user:pass@host:587?from=agentry@example.com
// (smtps:// for TLS from the start; the port defaults to 587, or 465 for smtps; from defaults
// to agentry@host).
func ParseSMTPURL(raw string) (*SMTP, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "smtp" && u.Scheme != "smtps") || u.Hostname() == "" {
		return nil, errors.New("must be smtp://[user:password@]host[:port][?from=address] (or smtps://)")
	}
	s := &SMTP{host: u.Hostname(), implicitTLS: u.Scheme == "smtps", timeout: 30 * time.Second}
	port := u.Port()
	if port == "" {
		port = "587"
		if s.implicitTLS {
			port = "465"
		}
	}
	s.addr = net.JoinHostPort(s.host, port)
	s.from = u.Query().Get("from")
	if s.from == "" {
		s.from = "agentry@" + s.host
	}
	if u.User != nil && u.User.Username() != "" {
		pass, _ := u.User.Password()
		s.auth = smtp.PlainAuth("", u.User.Username(), pass, s.host)
	}
	return s, nil
}

// Send delivers m.
func (s *SMTP) Send(ctx context.Context, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("smtp dial %s: %w", s.addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if s.implicitTLS {
		conn = tls.Client(conn, &tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12})
	}
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("smtp greeting: %w", err)
	}
	defer c.Close()
	if ok, _ := c.Extension("STARTTLS"); ok && !s.implicitTLS {
		if err := c.StartTLS(&tls.Config{ServerName: s.host, MinVersion: tls.VersionTLS12}); err != nil {
			return fmt.Errorf("smtp starttls: %w", err)
		}
	}
	if s.auth != nil {
		if err := c.Auth(s.auth); err != nil {
			return fmt.Errorf("smtp auth: %w", err)
		}
	}
	if err := c.Mail(s.from); err != nil {
		return fmt.Errorf("smtp MAIL FROM: %w", err)
	}
	if err := c.Rcpt(m.To); err != nil {
		return fmt.Errorf("smtp RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp DATA: %w", err)
	}
	if _, err := w.Write(compose(s.from, m)); err != nil {
		return fmt.Errorf("smtp write: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp end of data: %w", err)
	}
	return c.Quit()
}

// compose renders m as an RFC 5322 message with CRLF line ends.
func compose(from string, m Message) []byte {
	var b strings.Builder
	b.WriteString("From: " + from + "\r\n")
	b.WriteString("To: " + m.To + "\r\n")
	b.WriteString("Subject: " + mime.QEncoding.Encode("utf-8", m.Subject) + "\r\n")
	b.WriteString("Date: " + time.Now().UTC().Format(time.RFC1123Z) + "\r\n")
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n")
	// Dot-stuffing is the DATA writer's (textproto's DotWriter).
	for _, line := range strings.Split(strings.ReplaceAll(m.Text, "\r\n", "\n"), "\n") {
		b.WriteString(line + "\r\n")
	}
	return []byte(b.String())
}

// Outbox keeps the messages it is given, for tests that read the links a person would click.
type Outbox struct {
	mu   sync.Mutex
	msgs []Message
	more chan struct{}
}

// NewOutbox returns an empty outbox.
func NewOutbox() *Outbox { return &Outbox{more: make(chan struct{})} }

// Send keeps m.
func (o *Outbox) Send(_ context.Context, m Message) error {
	o.mu.Lock()
	o.msgs = append(o.msgs, m)
	close(o.more)
	o.more = make(chan struct{})
	o.mu.Unlock()
	return nil
}

// Sent returns the messages sent to the address to so far, oldest first.
func (o *Outbox) Sent(to string) []Message {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Message
	for _, m := range o.msgs {
		if strings.EqualFold(m.To, to) {
			out = append(out, m)
		}
	}
	return out
}

// Wait returns the n-th (from 1) message to the address to whose subject contains subject,
// waiting until ctx ends for it to be sent.
func (o *Outbox) Wait(ctx context.Context, to, subject string, n int) (Message, error) {
	for {
		o.mu.Lock()
		more := o.more
		seen := 0
		for _, m := range o.msgs {
			if strings.EqualFold(m.To, to) && strings.Contains(m.Subject, subject) {
				if seen++; seen == n {
					o.mu.Unlock()
					return m, nil
				}
			}
		}
		o.mu.Unlock()
		select {
		case <-more:
		case <-ctx.Done():
			return Message{}, fmt.Errorf("no message %q to %s: %w", subject, to, ctx.Err())
		}
	}
}

// SendLater sends m in the background: the request that causes it neither waits for the
// delivery nor tells of it (an answer must not reveal whether an address has an account). A
// failure is logged.
func SendLater(ctx context.Context, s Sender, log *slog.Logger, m Message) {
	if s == nil {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	ctx = context.WithoutCancel(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := s.Send(ctx, m); err != nil {
			log.WarnContext(ctx, "send email", slog.String("subject", m.Subject), slog.Any("error", err))
		}
	}()
}
