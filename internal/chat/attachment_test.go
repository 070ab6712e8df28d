package chat

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/extract"
	"github.com/agentry/agentry/internal/extract/extracttest"
	"github.com/agentry/agentry/internal/llm"
)

// testPDF is a one-page PDF showing text in Helvetica.
var testPDF = extracttest.TextPDF

func testPNG() []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 2, 2)))
	return b.Bytes()
}

func TestAttachmentBlocks(t *testing.T) {
	t.Parallel()
	blocks, images, err := attachmentBlocks(context.Background(), extract.Sandbox{}, []Attachment{
		{Filename: "notes.md", MediaType: "text/markdown; charset=utf-8", Data: []byte("# Notes\nbuy milk")},
		{Filename: "report.pdf", MediaType: "application/pdf", Data: testPDF("Revenue grew 42 percent")},
		{Filename: "dot.png", MediaType: "image/png", Data: testPNG()},
	})
	require.NoError(t, err)
	require.True(t, images)
	require.Len(t, blocks, 3)
	require.Equal(t, llm.BlockText, blocks[0].Type)
	require.Contains(t, blocks[0].Text, `filename="notes.md"`)
	require.Contains(t, blocks[0].Text, "# Notes\nbuy milk")
	require.Contains(t, blocks[1].Text, "Revenue grew 42 percent")
	require.Equal(t, llm.BlockImage, blocks[2].Type)
	require.Equal(t, "image/png", blocks[2].MediaType)

	_, images, err = attachmentBlocks(context.Background(), extract.Sandbox{}, []Attachment{{Filename: "a.json", MediaType: "application/json", Data: []byte(`{}`)}})
	require.NoError(t, err)
	require.False(t, images)

	long := strings.Repeat("é", MaxAttachmentText)
	blocks, _, err = attachmentBlocks(context.Background(), extract.Sandbox{}, []Attachment{{Filename: "long.txt", MediaType: "text/plain", Data: []byte(long)}})
	require.NoError(t, err)
	require.Contains(t, blocks[0].Text, "[cut: only the first")
	require.Less(t, len(blocks[0].Text), MaxAttachmentText+500)
}

func TestAttachmentRefusals(t *testing.T) {
	t.Parallel()
	many := make([]Attachment, MaxAttachments+1)
	for i := range many {
		many[i] = Attachment{Filename: "a.txt", MediaType: "text/plain", Data: []byte("a")}
	}
	for name, c := range map[string]struct {
		in   []Attachment
		want string
	}{
		"too many":         {many, "at most 5"},
		"too big":          {[]Attachment{{Filename: "big.txt", MediaType: "text/plain", Data: bytes.Repeat([]byte("a"), MaxAttachmentBytes+1)}}, "5 MiB"},
		"too big in all":   {[]Attachment{{Filename: "a.txt", MediaType: "text/plain", Data: bytes.Repeat([]byte("a"), MaxAttachmentBytes)}, {Filename: "b.txt", MediaType: "text/plain", Data: bytes.Repeat([]byte("a"), MaxAttachmentBytes)}, {Filename: "c.txt", MediaType: "text/plain", Data: []byte("a")}}, "10 MiB"},
		"unsupported":      {[]Attachment{{Filename: "a.zip", MediaType: "application/zip", Data: []byte("PK\x03\x04")}}, "not supported"},
		"not a png":        {[]Attachment{{Filename: "a.png", MediaType: "image/png", Data: []byte("hello")}}, "not a readable image"},
		"not text":         {[]Attachment{{Filename: "a.txt", MediaType: "text/plain", Data: []byte{0xff, 0xfe, 0}}}, "not UTF-8 text"},
		"not a pdf":        {[]Attachment{{Filename: "a.pdf", MediaType: "application/pdf", Data: []byte("hello")}}, "could not be read"},
		"broken pdf":       {[]Attachment{{Filename: "a.pdf", MediaType: "application/pdf", Data: []byte("%PDF-1.4\ngarbage")}}, "could not be read"},
		"empty":            {[]Attachment{{Filename: "a.txt", MediaType: "text/plain"}}, "is empty"},
		"no name":          {[]Attachment{{Filename: " ", MediaType: "text/plain", Data: []byte("a")}}, "filename"},
		"bad media type":   {[]Attachment{{Filename: "a", MediaType: "not a type", Data: []byte("a")}}, "not a media type"},
		"pdf without text": {[]Attachment{{Filename: "a.pdf", MediaType: "application/pdf", Data: testPDF("")}}, "no text"},
	} {
		_, _, err := attachmentBlocks(context.Background(), extract.Sandbox{}, c.in)
		require.Error(t, err, name)
		require.Equal(t, apperr.BadUserInput, apperr.CodeOf(err), name)
		require.Contains(t, err.Error(), c.want, name)
	}
}
