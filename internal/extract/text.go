package extract

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"

	"golang.org/x/text/encoding/charmap"
)

// The text of a page is what its content stream shows with the text operators (Tj, TJ, ', ")
// decoded through each string's font; line moves become line breaks and wide gaps spaces.
// Layout beyond that (columns, reading order) is not reconstructed.

// tokKind is a content-stream token's kind.
type tokKind uint8

const (
	tEOF tokKind = iota
	tNumber
	tString // literal or hex string: raw bytes
	tName
	tArray // a whole array, its strings and numbers flattened into items
	tOp
	tOther // dictionaries' delimiters, booleans: kept as operands, never read
)

type token struct {
	kind  tokKind
	num   float64
	str   string // string bytes, name or operator
	items []token
}

// lexer reads PDF content-stream syntax. Every step consumes at least one byte, so a pass is
// linear in the input whatever it holds.
type lexer struct {
	b []byte
	i int
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == 0
}

func isDelim(c byte) bool {
	return strings.IndexByte("()<>[]{}/%", c) >= 0
}

func (l *lexer) next() token {
	for l.i < len(l.b) {
		c := l.b[l.i]
		switch {
		case isSpace(c):
			l.i++
		case c == '%':
			for l.i < len(l.b) && l.b[l.i] != '\n' && l.b[l.i] != '\r' {
				l.i++
			}
		case c == '(':
			return token{kind: tString, str: l.literal()}
		case c == '<':
			if l.i+1 < len(l.b) && l.b[l.i+1] == '<' {
				l.i += 2
				return token{kind: tOther}
			}
			return token{kind: tString, str: l.hex()}
		case c == '>':
			l.i++
			if l.i < len(l.b) && l.b[l.i] == '>' {
				l.i++
			}
			return token{kind: tOther}
		case c == '[':
			l.i++
			return l.array()
		case c == ']' || c == '{' || c == '}' || c == ')':
			l.i++
			return token{kind: tOther, str: string(c)}
		case c == '/':
			l.i++
			return token{kind: tName, str: l.word()}
		default:
			w := l.word()
			if w == "" { // a lone delimiter byte not handled above
				l.i++
				continue
			}
			if n, err := strconv.ParseFloat(w, 64); err == nil && (w[0] == '-' || w[0] == '+' || w[0] == '.' || (w[0] >= '0' && w[0] <= '9')) {
				return token{kind: tNumber, num: n}
			}
			if w == "ID" { // inline image data: skip to EI
				l.skipInlineImage()
				continue
			}
			return token{kind: tOp, str: w}
		}
	}
	return token{kind: tEOF}
}

func (l *lexer) word() string {
	start := l.i
	for l.i < len(l.b) && !isSpace(l.b[l.i]) && !isDelim(l.b[l.i]) {
		l.i++
	}
	return string(l.b[start:l.i])
}

// maxArrayItems bounds the items kept from one array (the rest are read and dropped).
const maxArrayItems = 10_000

// array reads up to the matching ']'; nested arrays are flattened.
func (l *lexer) array() token {
	out := token{kind: tArray}
	for {
		t := l.next()
		switch t.kind {
		case tEOF:
			return out
		case tOther:
			if t.str == "]" {
				return out
			}
		case tArray:
			t.items = t.items[:min(len(t.items), maxArrayItems-len(out.items))]
			out.items = append(out.items, t.items...)
		case tString, tNumber:
			if len(out.items) < maxArrayItems {
				out.items = append(out.items, t)
			}
		}
	}
}

func (l *lexer) literal() string {
	l.i++ // (
	var b []byte
	depth := 1
	for l.i < len(l.b) {
		c := l.b[l.i]
		l.i++
		switch c {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return string(b)
			}
		case '\\':
			if l.i >= len(l.b) {
				return string(b)
			}
			e := l.b[l.i]
			l.i++
			switch e {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'f':
				c = '\f'
			case '\r':
				if l.i < len(l.b) && l.b[l.i] == '\n' {
					l.i++
				}
				continue
			case '\n':
				continue
			default:
				if e >= '0' && e <= '7' {
					v := int(e - '0')
					for k := 0; k < 2 && l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '7'; k++ {
						v = v*8 + int(l.b[l.i]-'0')
						l.i++
					}
					c = byte(v)
				} else {
					c = e
				}
			}
		}
		b = append(b, c)
	}
	return string(b)
}

func (l *lexer) hex() string {
	l.i++ // <
	var b []byte
	var hi int = -1
	for l.i < len(l.b) {
		c := l.b[l.i]
		l.i++
		if c == '>' {
			break
		}
		v := unhex(c)
		if v < 0 {
			continue
		}
		if hi < 0 {
			hi = v
		} else {
			b = append(b, byte(hi<<4|v))
			hi = -1
		}
	}
	if hi >= 0 {
		b = append(b, byte(hi<<4))
	}
	return string(b)
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func (l *lexer) skipInlineImage() {
	for l.i+2 < len(l.b) {
		if isSpace(l.b[l.i]) && l.b[l.i+1] == 'E' && l.b[l.i+2] == 'I' && (l.i+3 == len(l.b) || isSpace(l.b[l.i+3]) || isDelim(l.b[l.i+3])) {
			l.i += 3
			return
		}
		l.i++
	}
	l.i = len(l.b)
}

// maxOperands bounds the operands kept before an operator.
const maxOperands = 64

// textWriter collects shown text, with at most one separator between pieces.
type textWriter struct {
	b   strings.Builder
	sep byte // pending separator: 0, ' ' or '\n'
}

func (w *textWriter) separate(c byte) {
	if w.b.Len() > 0 && (w.sep == 0 || c == '\n') {
		w.sep = c
	}
}

func (w *textWriter) write(s string) {
	if s == "" {
		return
	}
	if w.sep != 0 {
		w.b.WriteByte(w.sep)
		w.sep = 0
	}
	w.b.WriteString(s)
}

// showText returns the text a content stream shows.
func showText(content []byte, fonts map[string]*font) string {
	l := lexer{b: content}
	var w textWriter
	var ops []token
	var cur *font
	lastY, haveY := 0.0, false
	show := func(t token) {
		if t.kind == tString {
			w.write(cur.decode(t.str))
		}
	}
	for w.b.Len() <= MaxText {
		t := l.next()
		if t.kind == tEOF {
			break
		}
		if t.kind != tOp {
			if len(ops) < maxOperands {
				ops = append(ops, t)
			}
			continue
		}
		arg := func(i int) token { // the i-th operand from the end
			if i < len(ops) {
				return ops[len(ops)-1-i]
			}
			return token{}
		}
		switch t.str {
		case "Tf":
			cur = fonts[arg(1).str]
		case "Tj":
			show(arg(0))
		case "'":
			w.separate('\n')
			show(arg(0))
		case "\"":
			w.separate('\n')
			show(arg(0))
		case "TJ":
			for _, it := range arg(0).items {
				if it.kind == tNumber && it.num < -250 {
					w.separate(' ')
				}
				show(it)
			}
		case "Td", "TD":
			if arg(0).num != 0 {
				w.separate('\n')
			} else if arg(1).num > 0 {
				w.separate(' ')
			}
		case "T*":
			w.separate('\n')
		case "Tm":
			y := arg(0).num
			if haveY && y != lastY {
				w.separate('\n')
			} else {
				w.separate(' ')
			}
			lastY, haveY = y, true
		case "ET":
			w.separate(' ')
		}
		ops = ops[:0]
	}
	return w.b.String()
}

// font decodes the bytes of strings shown in it.
type font struct {
	composite bool // Type0: two-byte codes
	cmap      *cmap
	enc       *charmap.Charmap
	diffs     map[byte]rune
}

// winAnsi stands for the standard Latin encodings, which agree on printable ASCII.
var winAnsi = charmap.Windows1252

func namedEncoding(name string) *charmap.Charmap {
	if name == "MacRomanEncoding" {
		return charmap.Macintosh
	}
	return winAnsi
}

// decode turns a shown string's bytes into text (a nil font reads them as WinAnsi).
func (f *font) decode(s string) string {
	if f == nil {
		f = &font{enc: winAnsi}
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if f.cmap != nil {
			if text, n := f.cmap.lookup(s[i:], f.composite); n > 0 {
				writeClean(&b, text)
				i += n
				continue
			}
		}
		if f.composite { // no mapping for this code: skip it
			i += 2
			continue
		}
		r, ok := f.diffs[s[i]]
		if !ok {
			r = f.enc.DecodeByte(s[i])
		}
		writeClean(&b, string(r))
		i++
	}
	return b.String()
}

// writeClean writes text without control characters (which Postgres or a reader could choke on).
func writeClean(b *strings.Builder, s string) {
	for _, r := range s {
		if r == unicode.ReplacementChar || (unicode.IsControl(r) && r != '\n' && r != '\t') {
			continue
		}
		b.WriteRune(r)
	}
}

// cmap is a ToUnicode CMap: character codes of one to four bytes to text.
type cmap struct {
	byLen [5]map[uint32]string
}

// maxCMapEntries bounds the codes one CMap may map.
const maxCMapEntries = 1 << 17

func (c *cmap) lookup(s string, composite bool) (string, int) {
	order := [4]int{1, 2, 3, 4}
	if composite {
		order = [4]int{2, 1, 3, 4}
	}
	for _, n := range order {
		if c.byLen[n] == nil || n > len(s) {
			continue
		}
		if text, ok := c.byLen[n][code(s[:n])]; ok {
			return text, n
		}
	}
	return "", 0
}

func code(s string) uint32 {
	var v uint32
	for i := 0; i < len(s); i++ {
		v = v<<8 | uint32(s[i])
	}
	return v
}

func (c *cmap) add(src string, text string, entries *int) {
	n := len(src)
	if n < 1 || n > 4 || *entries >= maxCMapEntries {
		return
	}
	if c.byLen[n] == nil {
		c.byLen[n] = map[uint32]string{}
	}
	c.byLen[n][code(src)] = text
	*entries++
}

// parseCMap reads the bfchar and bfrange sections of a ToUnicode CMap. Anything else is skipped.
func parseCMap(data []byte) *cmap {
	l := lexer{b: data}
	c := &cmap{}
	entries := 0
	var ops []token
	for entries < maxCMapEntries {
		t := l.next()
		if t.kind == tEOF {
			break
		}
		if t.kind != tOp {
			if len(ops) < 3*maxOperands*10 {
				ops = append(ops, t)
			}
			continue
		}
		switch t.str {
		case "endbfchar":
			for i := 0; i+1 < len(ops); i += 2 {
				if ops[i].kind == tString && ops[i+1].kind == tString {
					c.add(ops[i].str, utf16BE(ops[i+1].str), &entries)
				}
			}
		case "endbfrange":
			for i := 0; i+2 < len(ops); i += 3 {
				lo, hi, dst := ops[i], ops[i+1], ops[i+2]
				if lo.kind != tString || hi.kind != tString || len(lo.str) != len(hi.str) {
					continue
				}
				a, z := code(lo.str), code(hi.str)
				if z < a || z-a > 0xffff {
					continue
				}
				for k := uint32(0); k <= z-a && entries < maxCMapEntries; k++ {
					src := codeBytes(a+k, len(lo.str))
					switch {
					case dst.kind == tString && len(dst.str) > 0:
						d := []byte(dst.str)
						last := uint32(d[len(d)-1]) + k // the last byte counts up, as in PDF 9.10.3
						d[len(d)-1] = byte(last)
						c.add(src, utf16BE(string(d)), &entries)
					case dst.kind == tArray && int(k) < len(dst.items) && dst.items[k].kind == tString:
						c.add(src, utf16BE(dst.items[k].str), &entries)
					}
				}
			}
		}
		ops = ops[:0]
	}
	return c
}

func codeBytes(v uint32, n int) string {
	b := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return string(b)
}

func utf16BE(s string) string {
	u := make([]uint16, 0, len(s)/2)
	for i := 0; i+1 < len(s); i += 2 {
		u = append(u, uint16(s[i])<<8|uint16(s[i+1]))
	}
	return string(utf16.Decode(u))
}

// glyphNames are the glyph names of Differences arrays that are not uniXXXX or one character.
var glyphNames = map[string]rune{
	"space": ' ', "exclam": '!', "quotedbl": '"', "numbersign": '#', "dollar": '$', "percent": '%',
	"ampersand": '&', "quotesingle": '\'', "parenleft": '(', "parenright": ')', "asterisk": '*',
	"plus": '+', "comma": ',', "hyphen": '-', "period": '.', "slash": '/', "colon": ':',
	"semicolon": ';', "less": '<', "equal": '=', "greater": '>', "question": '?', "at": '@',
	"zero": '0', "one": '1', "two": '2', "three": '3', "four": '4', "five": '5', "six": '6',
	"seven": '7', "eight": '8', "nine": '9', "quoteleft": '‘', "quoteright": '’',
	"quotedblleft": '“', "quotedblright": '”', "endash": '–', "emdash": '—', "bullet": '•',
	"ellipsis": '…', "fi": 'ﬁ', "fl": 'ﬂ', "ff": 'ﬀ', "ffi": 'ﬃ', "ffl": 'ﬄ', "underscore": '_',
	"bracketleft": '[', "bracketright": ']', "braceleft": '{', "braceright": '}', "bar": '|',
	"backslash": '\\', "asciitilde": '~', "asciicircum": '^', "grave": '`', "degree": '°',
	"eacute": 'é', "egrave": 'è', "agrave": 'à', "ccedilla": 'ç', "udieresis": 'ü', "odieresis": 'ö',
	"adieresis": 'ä', "germandbls": 'ß', "Euro": '€', "copyright": '©', "registered": '®',
}

func glyphRune(name string) (rune, bool) {
	if r, ok := glyphNames[name]; ok {
		return r, true
	}
	if len(name) == 1 {
		return rune(name[0]), true
	}
	if hex, ok := strings.CutPrefix(name, "uni"); ok && len(hex) == 4 {
		if v, err := strconv.ParseUint(hex, 16, 16); err == nil {
			return rune(v), true
		}
	}
	return 0, false
}
