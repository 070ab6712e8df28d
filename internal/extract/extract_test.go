package extract

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentry/agentry/internal/extract/extracttest"
)

var (
	pdfOf   = extracttest.PDF
	textPDF = extracttest.ContentPDF
	selfPDF = extracttest.SelfReferencingPDF
)

func pngOf(w, h int) []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h)))
	return b.Bytes()
}

func rgbaPNG(w, h int) []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewNRGBA(image.Rect(0, 0, w, h)))
	return b.Bytes()
}

func TestExtractPDF(t *testing.T) {
	t.Parallel()
	c, err := Extract(File{Kind: KindPDF, Data: textPDF("BT /F1 18 Tf 72 720 Td (Revenue grew 42 percent) Tj 0 -20 Td [(next)-300(line)] TJ ET")})
	require.NoError(t, err)
	require.Equal(t, "Revenue grew 42 percent\nnext line", c.Text)

	// A composite font whose ToUnicode CMap maps two-byte codes.
	cmap := "/CIDInit /ProcSet findresource begin 12 dict begin begincmap 1 begincodespacerange <0000> <FFFF> endcodespacerange " +
		"2 beginbfchar <0001> <0048> <0002> <00E9> endbfchar 1 beginbfrange <0010> <0012> <0061> endbfrange endcmap end end"
	content := "BT /F1 12 Tf <0001000200100011001200FF> Tj ET"
	c, err = Extract(File{Kind: KindPDF, Data: pdfOf(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type0 /BaseFont /X /Encoding /Identity-H /DescendantFonts [6 0 R] /ToUnicode 7 0 R >>",
		"<< /Type /Font /Subtype /CIDFontType2 /BaseFont /X /CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> /FontDescriptor 8 0 R >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(cmap), cmap),
		"<< /Type /FontDescriptor /FontName /X /Flags 4 /FontBBox [0 0 1000 1000] /ItalicAngle 0 /Ascent 800 /Descent -200 /CapHeight 700 /StemV 80 >>",
	)})
	require.NoError(t, err)
	require.Equal(t, "Habc", strings.ReplaceAll(c.Text, "é", "")[:4])
	require.Contains(t, c.Text, "é")
}

func TestExtractRefusals(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]File{
		"self-referencing page tree": {Kind: KindPDF, Data: selfPDF()},
		"not a pdf":                  {Kind: KindPDF, Data: []byte("hello")},
		"garbage pdf":                {Kind: KindPDF, Data: []byte("%PDF-1.4\ngarbage")},
		"truncated pdf":              {Kind: KindPDF, Data: textPDF("BT (x) Tj ET")[:120]},
		"not text":                   {Kind: KindText, Data: []byte{0xff, 0xfe, 0}},
		"not a png":                  {Kind: KindImage, MediaType: "image/png", Data: []byte("hello")},
		"png said jpeg":              {Kind: KindImage, MediaType: "image/jpeg", Data: pngOf(2, 2)},
		"too many pixels":            {Kind: KindImage, MediaType: "image/png", Data: pngOf(MaxImageSide+1, 1)},
		"damaged png":                {Kind: KindImage, MediaType: "image/png", Data: pngOf(64, 64)[:60]},
	} {
		_, err := Extract(f)
		var e *Error
		require.ErrorAs(t, err, &e, name)
	}
}

func TestSandbox(t *testing.T) {
	t.Parallel()
	var s Sandbox
	out, err := s.Run(context.Background(), []File{
		{Kind: KindText, Data: []byte("hello")},
		{Kind: KindPDF, Data: selfPDF()},
		{Kind: KindPDF, Data: textPDF("BT /F1 18 Tf (inside) Tj ET")},
		{Kind: KindImage, MediaType: "image/png", Data: pngOf(3, 2)},
	})
	require.NoError(t, err)
	require.Len(t, out, 4)
	require.Equal(t, "hello", out[0].Content.Text)
	require.Contains(t, out[1].Err, "page tree")
	require.Equal(t, "inside", out[2].Content.Text)
	require.Equal(t, 3, out[3].Content.Width)
}

// TestSandboxMemory: a child that needs more memory than it may have dies, and the file is
// refused naming the limit (an 8000x5000 RGBA image decodes to 160 MB, past the 8 MiB the child
// may add and what its runtime has reserved at start).
func TestSandboxMemory(t *testing.T) {
	t.Parallel()
	s := Sandbox{Memory: 8 << 20}
	_, err := s.Run(context.Background(), []File{{Kind: KindText, Data: []byte("a")}, {Kind: KindImage, MediaType: "image/png", Data: rgbaPNG(8000, 5000)}})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 1, e.Index)
	require.Contains(t, e.Reason, "more than 8 MiB of memory")
}

// TestSandboxDeadline: a child that never ends is killed at the deadline and leaves no process.
func TestSandboxDeadline(t *testing.T) {
	t.Parallel()
	pidFile := t.TempDir() + "/pid"
	s := Sandbox{Command: []string{"/bin/sh", "-c", `echo $$ > ` + pidFile + `; exec /bin/sh -c 'while :; do :; done'`, "extract"}, Timeout: 500 * time.Millisecond}
	_, err := s.Run(context.Background(), []File{{Kind: KindText, Data: []byte("a")}})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Contains(t, e.Reason, "could not be read within 500ms")
	raw, rerr := os.ReadFile(pidFile)
	require.NoError(t, rerr)
	var pid int
	_, _ = fmt.Sscan(string(raw), &pid)
	require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "the child is gone")
}

// TestSandboxCancel: the caller's context ending kills the child and is returned as is.
func TestSandboxCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	s := Sandbox{Command: []string{"/bin/sh", "-c", `kill -STOP $$`, "extract"}}
	go cancel()
	_, err := s.Run(ctx, []File{{Kind: KindText, Data: []byte("a")}})
	require.ErrorIs(t, err, context.Canceled)
}

// BenchmarkSandbox is the cost of one Run (a child process reading one small PDF): what an
// attachment adds to sendMessage.
func BenchmarkSandbox(b *testing.B) {
	var s Sandbox
	files := []File{{Kind: KindPDF, Data: textPDF("BT /F1 18 Tf (hello) Tj ET")}}
	for b.Loop() {
		if _, err := s.Run(context.Background(), files); err != nil {
			b.Fatal(err)
		}
	}
}
