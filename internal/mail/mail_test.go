package mail_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/mail"
)

// smtpServer is a minimal SMTP server on loopback that records one session.
type smtpServer struct {
	addr string
	got  chan map[string]string
}

func startSMTP(t *testing.T) *smtpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	s := &smtpServer{addr: ln.Addr().String(), got: make(chan map[string]string, 1)}
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		r, w := bufio.NewReader(conn), conn
		rec := map[string]string{}
		say := func(line string) { _, _ = w.Write([]byte(line + "\r\n")) }
		say("220 localhost ESMTP test")
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
			switch verb {
			case "EHLO", "HELO":
				say("250-localhost")
				say("250 AUTH PLAIN")
			case "AUTH":
				rec["auth"] = line
				say("235 ok")
			case "MAIL":
				rec["from"] = line
				say("250 ok")
			case "RCPT":
				rec["to"] = line
				say("250 ok")
			case "DATA":
				say("354 go on")
				var data strings.Builder
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if l == ".\r\n" {
						break
					}
					data.WriteString(l)
				}
				rec["data"] = data.String()
				say("250 queued")
			case "QUIT":
				say("221 bye")
				s.got <- rec
				return
			default:
				say("502 unknown")
			}
		}
	}()
	return s
}

// TestSMTPSends: the SMTP sender authenticates with the URL's user, sends from the URL's from
// address to the message's recipient, with the subject and text.
func TestSMTPSends(t *testing.T) {
	t.Parallel()
	srv := startSMTP(t)
	host, port, err := net.SplitHostPort(srv.addr)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", host)
	s, err := mail.ParseSMTPURL("smtp://mailer:s3cret@localhost:" + port + "?from=agentry@example.com")
	require.NoError(t, err)
	err = s.Send(context.Background(), mail.Message{To: "ada@example.com", Subject: "Verify your email", Text: "Open https://app/x?token=agv_1\n.hidden line"})
	require.NoError(t, err)
	rec := <-srv.got
	plain, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(rec["auth"], "AUTH PLAIN "))
	require.NoError(t, err)
	require.Equal(t, "\x00mailer\x00s3cret", string(plain))
	require.Equal(t, "MAIL FROM:<agentry@example.com>", rec["from"])
	require.Equal(t, "RCPT TO:<ada@example.com>", rec["to"])
	require.Contains(t, rec["data"], "Subject: Verify your email\r\n")
	require.Contains(t, rec["data"], "To: ada@example.com\r\n")
	require.Contains(t, rec["data"], "Open https://app/x?token=agv_1\r\n")
	require.Contains(t, rec["data"], "\n..hidden line\r\n", "a line starting with a dot is stuffed once")
}

func TestParseSMTPURL(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "http://host", "smtp://", "smtp:///x", "://"} {
		_, err := mail.ParseSMTPURL(bad)
		require.Error(t, err, bad)
	}
	_, err := mail.ParseSMTPURL("smtps://mail.example.com")
	require.NoError(t, err)
}
