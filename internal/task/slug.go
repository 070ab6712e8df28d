package task

import (
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// maxSlugBase is the longest slug Slugify returns, leaving room for a "-<n>" suffix within the
// table's 80-character limit.
const maxSlugBase = 60

// fallbackSlug is the slug of a title with no letter or digit in a-z, 0-9.
const fallbackSlug = "task"

// Slugify derives a slug from a title: lowercase ASCII letters and digits, every other run of
// characters one dash, no dash at either end, at most 60 characters (cut at a dash when
// possible). Accented Latin letters lose their accents ("Café" -> "cafe"). A title with nothing
// left is "task".
func Slugify(title string) string {
	var b strings.Builder
	dash := false
	for _, r := range norm.NFKD.String(title) {
		switch {
		case unicode.Is(unicode.Mn, r):
			continue // a combining accent of the letter before it
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case r >= 'A' && r <= 'Z':
			r += 'a' - 'A'
		default:
			dash = b.Len() > 0
			continue
		}
		if dash {
			b.WriteByte('-')
			dash = false
		}
		b.WriteRune(r)
	}
	s := b.String()
	if len(s) > maxSlugBase {
		s = s[:maxSlugBase]
		if i := strings.LastIndexByte(s, '-'); i >= maxSlugBase/2 {
			s = s[:i]
		}
		s = strings.TrimRight(s, "-")
	}
	if s == "" {
		return fallbackSlug
	}
	return s
}

// uniqueSlug returns base when it is not taken, else the first of base-2, base-3, ... that is
// not.
func uniqueSlug(base string, taken []string) string {
	set := make(map[string]bool, len(taken))
	for _, s := range taken {
		set[s] = true
	}
	if !set[base] {
		return base
	}
	for n := 2; ; n++ {
		if s := base + "-" + strconv.Itoa(n); !set[s] {
			return s
		}
	}
}
