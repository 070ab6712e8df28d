package extract

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/validate"
)

// pdfcpu parses the file (cross references, object streams, filters, the page tree with its
// cycles refused) under its own resource limits; the text is read from the decoded content
// streams here (text.go), as pdfcpu has no text extraction.

// maxDecoded bounds the bytes one stream may decode to, and so a page's content.
const maxDecoded = 64 << 20

var disableConfig sync.Once

func pdfConfig() *model.Configuration {
	disableConfig.Do(api.DisableConfigDir) // no configuration directory or user fonts on disk
	conf := model.NewDefaultConfiguration()
	conf.ValidationMode = model.ValidationRelaxed
	conf.Limits.MaxStreamBytes = MaxFileBytes
	conf.Limits.MaxDecodeBytes = maxDecoded
	conf.Limits.MaxImagePixels = MaxImagePixels
	conf.Limits.MaxImageBytes = maxDecoded
	conf.Limits.MaxObjectCount = 1_000_000
	conf.Limits.MaxObjectStreamCount = 100_000
	conf.Limits.MaxXRefEntries = 1_000_000
	conf.Limits.MaxRecursionDepth = 50
	return conf
}

// MaxFileBytes is the largest file read.
const MaxFileBytes = 5 << 20

// pdfText returns a PDF's text, page by page, stopping once MaxText is passed.
func pdfText(data []byte) (string, error) {
	if !bytes.HasPrefix(data, []byte("%PDF-")) {
		return "", refuse("it does not start with %%PDF-")
	}
	if len(data) > MaxFileBytes {
		return "", refuse("it is larger than %d bytes", MaxFileBytes)
	}
	ctx, err := pdfcpu.ReadWithContext(context.Background(), bytes.NewReader(data), pdfConfig())
	if err != nil {
		return "", refuse("the PDF could not be read (%v)", short(err))
	}
	if err := validate.XRefTable(ctx); err != nil {
		return "", refuse("the PDF is malformed (%v)", short(err))
	}
	var b strings.Builder
	for i := 1; i <= min(ctx.PageCount, maxPDFPages) && b.Len() <= MaxText; i++ {
		page, _, _, err := ctx.PageDict(i, true)
		if err != nil {
			return "", refuse("page %d of the PDF could not be read (%v)", i, short(err))
		}
		if page == nil {
			continue
		}
		content, err := ctx.PageContent(page, i)
		if errors.Is(err, model.ErrNoContent) {
			continue
		}
		if err != nil {
			return "", refuse("page %d of the PDF could not be read (%v)", i, short(err))
		}
		fonts := pageFonts(ctx.XRefTable, page)
		t := strings.TrimSpace(showText(content, fonts))
		if t == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(t)
	}
	return b.String(), nil
}

// short keeps an error's message to one readable line.
func short(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.ReplaceAll(s, "\n", " ")
}

// pageFonts maps the font names of a page's resources to how their strings decode.
func pageFonts(x *model.XRefTable, page types.Dict) map[string]*font {
	out := map[string]*font{}
	res, err := x.DereferenceDict(page["Resources"])
	if err != nil || res == nil {
		return out
	}
	fonts, err := x.DereferenceDict(res["Font"])
	if err != nil || fonts == nil {
		return out
	}
	for name, ref := range fonts {
		d, err := x.DereferenceDict(ref)
		if err != nil || d == nil {
			continue
		}
		out[name] = loadFont(x, d)
	}
	return out
}

// loadFont reads how a font's string bytes map to text: its ToUnicode CMap when it has one,
// else its encoding (simple fonts only; a composite font without ToUnicode yields no text).
func loadFont(x *model.XRefTable, d types.Dict) *font {
	f := &font{composite: d.Subtype() != nil && *d.Subtype() == "Type0", enc: winAnsi}
	if sd, _, err := x.DereferenceStreamDict(d["ToUnicode"]); err == nil && sd != nil {
		if err := sd.DecodeWithLimit(maxDecoded); err == nil {
			f.cmap = parseCMap(sd.Content)
		}
	}
	enc, _ := x.Dereference(d["Encoding"])
	switch e := enc.(type) {
	case types.Name:
		f.enc = namedEncoding(string(e))
	case types.Dict:
		if base := e.NameEntry("BaseEncoding"); base != nil {
			f.enc = namedEncoding(*base)
		}
		if diffs, err := x.DereferenceArray(e["Differences"]); err == nil {
			f.diffs = differences(diffs)
		}
	}
	return f
}

// differences reads an encoding's Differences array: a code, then glyph names for it and the
// codes after it.
func differences(a types.Array) map[byte]rune {
	out := map[byte]rune{}
	code := -1
	for _, o := range a {
		switch v := o.(type) {
		case types.Integer:
			code = int(v)
		case types.Name:
			if code >= 0 && code < 256 {
				if r, ok := glyphRune(string(v)); ok {
					out[byte(code)] = r
				}
			}
			code++
		}
	}
	return out
}
