package extract

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzFiles maps the fuzzer's first byte to the kind of file its data is read as.
var fuzzFiles = []File{
	{Kind: KindText},
	{Kind: KindPDF},
	{Kind: KindImage, MediaType: "image/png"},
	{Kind: KindImage, MediaType: "image/jpeg"},
	{Kind: KindImage, MediaType: "image/gif"},
	{Kind: KindImage, MediaType: "image/webp"},
}

// FuzzExtract feeds arbitrary files to the extraction entry point. The seed corpus
// (testdata/fuzz/FuzzExtract) holds the self-referencing page tree of the attack, a page tree
// with a parent loop, text pages (plain, compressed, a composite font with a ToUnicode CMap,
// an inline image) and small images. Every input must end in text or an *Error: no panic, no
// other error, no text that is not UTF-8, holds a NUL or passes MaxText. (A hang shows as the
// fuzzer's timeout.)
func FuzzExtract(f *testing.F) {
	f.Add(byte(1), selfPDF())
	f.Add(byte(1), textPDF("BT /F1 18 Tf (hello) Tj ET"))
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		file := fuzzFiles[int(kind)%len(fuzzFiles)]
		file.Data = data
		c, err := Extract(file)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error of another type %T: %v", err, err)
			}
			return
		}
		if !utf8.ValidString(c.Text) || strings.IndexByte(c.Text, 0) >= 0 || len(c.Text) > MaxText {
			t.Fatalf("bad text: %q", c.Text[:min(len(c.Text), 200)])
		}
	})
}
