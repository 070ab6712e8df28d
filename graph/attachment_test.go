package graph_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/extract/extracttest"
)

// childReaders lists the attachment readers (children started with the argument "extract")
// this process has running.
func childReaders(t *testing.T) []string {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	var out []string
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing parenthesis.
		fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && args[1] == "extract" {
			out = append(out, filepath.Base(filepath.Dir(p)))
		}
	}
	return out
}

// TestHostilePDFAttachment sends a hostile attachment as an attacker would: a PDF whose page
// tree lists itself, sent with sendMessage. The answer is a clear BAD_USER_INPUT naming the attachment,
// nothing is stored, no reader is left running, and the server goes on answering.
func TestHostilePDFAttachment(t *testing.T) {
	t.Parallel()
	c := newCWEnv(t, nil)
	conv := c.conversation(t, nil)
	messages := func() int { return c.count(t, `SELECT count(*) FROM messages`) }
	m0 := messages()
	for range 3 {
		_, res := c.send(t, conv, "summarise this", map[string]any{"attachments": []any{
			attachment("notes.txt", "text/plain", []byte("fine")),
			attachment("loop.pdf", "application/pdf", extracttest.SelfReferencingPDF()),
		}})
		require.Equal(t, "BAD_USER_INPUT", res.Code(), "%s", res.Body)
		require.Contains(t, res.Errors[0].Message, "loop.pdf could not be read", "%s", res.Body)
		require.Contains(t, res.Errors[0].Message, "page tree", "%s", res.Body)
		require.Equal(t, "attachments[1]", res.Errors[0].Extensions["field"], "%s", res.Body)
	}
	require.Equal(t, m0, messages(), "a refused message stores nothing")
	require.Empty(t, childReaders(t), "no attachment reader is left running")
	// The server is free: a good PDF goes through.
	s, res := c.send(t, conv, "and this", map[string]any{"attachments": []any{attachment("ok.pdf", "application/pdf", cwPDF("All good"))}})
	require.Empty(t, res.Errors, "%s", res.Body)
	require.NotEmpty(t, s.RunID)
}
