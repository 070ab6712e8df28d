package workspace

import (
	"path"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentry/agentry/internal/apperr"
)

// Path limits, in bytes of UTF-8.
const (
	// MaxPathBytes is the longest path a workspace file may have.
	MaxPathBytes = 1024
	// MaxSegmentBytes is the longest name between two slashes.
	MaxSegmentBytes = 255
)

// Reasons a path is refused. They travel in the error's "reason" field; the message explains
// them in words.
const (
	ReasonEmpty          = "empty"
	ReasonTooLong        = "too_long"
	ReasonSegmentTooLong = "segment_too_long"
	ReasonInvalidUTF8    = "invalid_utf8"
	ReasonControlChar    = "control_character"
	ReasonBackslash      = "backslash"
	ReasonAbsolute       = "absolute"
	ReasonDriveLetter    = "drive_letter"
	ReasonHome           = "home"
	ReasonDotDot         = "dot_dot"
	ReasonTrailingDot    = "trailing_dot_or_space"
	ReasonDirectory      = "directory"
	ReasonRoot           = "root"
)

// NormalizePath checks a file path given by a user or a model and returns its normal form, the
// key the file is stored under.
//
// A workspace lives in Postgres: there is no file system underneath, so there are no symlinks,
// hard links, devices or permissions to escape through, and a path is only a key. The rules
// below still refuse everything that would mean something else on a real file system, so that a
// path never changes meaning if a workspace is exported to disk or shown to a person, and so
// that a model probing for traversal gets a plain refusal rather than a surprising success.
//
// The normal form is relative, slash-separated and clean (path.Clean): "a/./b" and "a//b" become
// "a/b", and a leading "./" is dropped. A path is refused (apperr BAD_USER_INPUT, field "path",
// with a "reason" field naming the rule) when it:
//
//   - is empty, or names the workspace root ("." or "./");
//   - is longer than MaxPathBytes, or has a segment longer than MaxSegmentBytes;
//   - is not valid UTF-8, or contains U+FFFD (the replacement character: what invalid UTF-8
//     becomes once it has been through JSON, refused so both spellings behave alike);
//   - contains a control character (NUL, newline, tab, DEL, C1), an invisible formatting
//     character (Unicode Cf: zero-width, bidirectional overrides, BOM) or a line or paragraph
//     separator;
//   - contains a backslash (a Windows separator: "..\..\x", "C:\x", "\\server\share");
//   - is absolute ("/etc/passwd", "//host/x") or starts with a drive letter ("C:", "c:x");
//   - starts with "~" ("~/x", "~root/x": home-directory expansion);
//   - has a ".." segment anywhere, before or after cleaning ("..", "a/../b", "./../x"). Even a
//     ".." that would stay inside the workspace is refused: there is one spelling per file;
//   - has a segment ending in a dot or a space ("a./b", "x "), which Windows strips silently;
//     "." segments themselves are removed by cleaning, and names that start with a dot
//     (".env", ".git/config") are fine;
//   - ends with "/" ("dir/"): that names a directory, and a workspace stores only files.
//
// Percent-encoding is not decoded: "%2e%2e/x" is a file named "x" in a directory literally
// named "%2e%2e", which is harmless. Unicode is not normalised (NFC and NFD spellings of a name
// are different files), and names reserved on Windows (CON, NUL) are not special.
func NormalizePath(p string) (string, error) {
	return normalize("path", p, false)
}

// NormalizePrefix is NormalizePath for the prefix of a listing or search: it names a directory
// (or a file) whose files are wanted. The empty string, "." and "./" name the whole workspace
// and normalise to ""; a trailing slash is allowed ("src/" is "src"). Every other rule of
// NormalizePath applies; errors name the field "prefix".
func NormalizePrefix(p string) (string, error) {
	return normalize("prefix", p, true)
}

func normalize(field, p string, prefix bool) (string, error) {
	bad := func(reason, format string, args ...any) (string, error) {
		return "", apperr.Invalid(field, format, args...).With("reason", reason)
	}
	if p == "" {
		if prefix {
			return "", nil
		}
		return bad(ReasonEmpty, "is empty; give a file path relative to the workspace root, like \"src/main.go\"")
	}
	// Length first, so that nothing below works on an unbounded string or quotes it whole.
	if len(p) > MaxPathBytes {
		return bad(ReasonTooLong, "%s is %d bytes long; the limit is %d bytes", show(p), len(p), MaxPathBytes)
	}
	if !utf8.ValidString(p) {
		return bad(ReasonInvalidUTF8, "%s is not valid UTF-8", show(p))
	}
	for _, r := range p {
		switch {
		case r == utf8.RuneError:
			return bad(ReasonInvalidUTF8, "%s contains U+FFFD (the replacement character left by invalid UTF-8)", show(p))
		case unicode.IsControl(r):
			return bad(ReasonControlChar, "%s contains the control character %U", show(p), r)
		case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			return bad(ReasonControlChar, "%s contains the invisible character %U", show(p), r)
		}
	}
	if strings.ContainsRune(p, '\\') {
		return bad(ReasonBackslash, "%s contains a backslash; use forward slashes (\"dir/file\")", show(p))
	}
	if p[0] == '/' {
		return bad(ReasonAbsolute, "%s is absolute; give a path relative to the workspace root (\"etc/passwd\", not \"/etc/passwd\")", show(p))
	}
	if len(p) >= 2 && p[1] == ':' && isASCIILetter(p[0]) {
		return bad(ReasonDriveLetter, "%s starts with a drive letter; give a path relative to the workspace root", show(p))
	}
	if p[0] == '~' {
		return bad(ReasonHome, "%s starts with \"~\"; there is no home directory, give a path relative to the workspace root", show(p))
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return bad(ReasonDotDot, "%s contains a \"..\" segment; paths cannot leave or climb within the workspace, spell the path without \"..\"", show(p))
		}
	}
	if !prefix && strings.HasSuffix(p, "/") {
		return bad(ReasonDirectory, "%s ends with \"/\" and so names a directory; give a file path", show(p))
	}
	// With no ".." segment and no leading slash, cleaning only drops "." and empty segments and
	// a trailing slash: it cannot climb, and the result is no longer than p.
	clean := path.Clean(p)
	if clean == "." {
		if prefix {
			return "", nil
		}
		return bad(ReasonRoot, "%s names the workspace root, not a file", show(p))
	}
	for _, seg := range strings.Split(clean, "/") {
		if len(seg) > MaxSegmentBytes {
			return bad(ReasonSegmentTooLong, "%s has a name of %d bytes; the limit per name is %d bytes", show(p), len(seg), MaxSegmentBytes)
		}
		if last := seg[len(seg)-1]; last == '.' || last == ' ' {
			return bad(ReasonTrailingDot, "%s has a name ending in a dot or a space (%q), which Windows strips; rename it", show(p), seg)
		}
	}
	return clean, nil
}

// show quotes p for an error message (escaping control characters and invalid UTF-8), cut to
// a readable length.
func show(p string) string {
	const max = 80
	if len(p) <= max {
		return strconv.Quote(p)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return strconv.Quote(p[:cut]) + "..."
}

func isASCIILetter(b byte) bool { return ('a' <= b && b <= 'z') || ('A' <= b && b <= 'Z') }
