package chat

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/llm"
)

// Attachment limits of one message. (AGENTRY_MAX_BODY_BYTES caps the whole GraphQL request
// first: attachments travel base64-encoded, a third larger than the file.)
const (
	// MaxAttachments is the most files one message may carry.
	MaxAttachments = 5
	// MaxAttachmentBytes caps one file.
	MaxAttachmentBytes = 5 << 20
	// MaxAttachmentsBytes caps the files of one message together.
	MaxAttachmentsBytes = 10 << 20
	// MaxAttachmentText caps the text kept from one text file or PDF (longer text is cut, with a
	// note saying so).
	MaxAttachmentText = 200_000
	// maxPDFPages bounds the pages read from one PDF.
	maxPDFPages = 1000
)

// Attachment is a file sent with a message.
type Attachment struct {
	Filename  string
	MediaType string
	Data      []byte
}

// imageTypes are the image formats models accept.
var imageTypes = map[string]string{"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}

// textTypes are the application/* types read as text (besides every text/*).
var textTypes = map[string]bool{
	"application/json": true, "application/xml": true, "application/yaml": true, "application/x-yaml": true,
	"application/toml": true, "application/javascript": true, "application/x-sh": true, "application/sql": true,
	"application/x-ndjson": true, "application/ld+json": true, "application/csv": true,
}

// attachmentBlocks checks a message's attachments and turns them into content blocks: a text
// file or a PDF becomes a text block holding its (extracted) text under a header naming the
// file, an image an image block. It reports whether any is an image (the caller checks the
// model takes images). Every refusal is BAD_USER_INPUT naming the attachment and the limit.
func attachmentBlocks(atts []Attachment) ([]llm.Block, bool, error) {
	if len(atts) > MaxAttachments {
		return nil, false, apperr.Invalid("attachments", "%d files sent; at most %d are accepted per message", len(atts), MaxAttachments)
	}
	var blocks []llm.Block
	images, total := false, 0
	for i, a := range atts {
		field := fmt.Sprintf("attachments[%d]", i)
		name := strings.TrimSpace(a.Filename)
		if name == "" || utf8.RuneCountInString(name) > 255 || !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\n\r") {
			return nil, false, apperr.Invalid(field+".filename", "must be a file name of 1 to 255 characters")
		}
		if len(a.Data) == 0 {
			return nil, false, apperr.Invalid(field, "%s is empty", name)
		}
		if len(a.Data) > MaxAttachmentBytes {
			return nil, false, apperr.Invalid(field, "%s is %d bytes; files of at most %d bytes (5 MiB) are accepted", name, len(a.Data), MaxAttachmentBytes).With("limit", MaxAttachmentBytes)
		}
		if total += len(a.Data); total > MaxAttachmentsBytes {
			return nil, false, apperr.Invalid("attachments", "the files are %d bytes together; at most %d bytes (10 MiB) are accepted per message", total, MaxAttachmentsBytes).With("limit", MaxAttachmentsBytes)
		}
		mt, _, err := mime.ParseMediaType(a.MediaType)
		if err != nil {
			return nil, false, apperr.Invalid(field+".mediaType", "%q is not a media type such as text/plain, application/pdf or image/png", a.MediaType)
		}
		switch {
		case imageTypes[mt] != "":
			if got := http.DetectContentType(a.Data); got != mt {
				return nil, false, apperr.Invalid(field, "%s is not a %s image (its content looks like %s)", name, imageTypes[mt], got)
			}
			images = true
			blocks = append(blocks, llm.Block{Type: llm.BlockImage, MediaType: mt, Data: a.Data})
		case mt == "application/pdf":
			text, err := pdfText(a.Data)
			if err != nil {
				return nil, false, apperr.Invalid(field, "%s: the PDF could not be read: %v", name, err)
			}
			if strings.TrimSpace(text) == "" {
				return nil, false, apperr.Invalid(field, "%s has no text to extract (a scanned PDF? send its pages as images)", name)
			}
			blocks = append(blocks, textAttachment(name, mt, text))
		case strings.HasPrefix(mt, "text/") || textTypes[mt]:
			if !utf8.Valid(a.Data) || bytes.IndexByte(a.Data, 0) >= 0 {
				return nil, false, apperr.Invalid(field, "%s is not UTF-8 text", name)
			}
			blocks = append(blocks, textAttachment(name, mt, string(a.Data)))
		default:
			return nil, false, apperr.Invalid(field+".mediaType", "%s (%s) is not supported: send text files, PDFs or images (PNG, JPEG, GIF, WebP)", name, mt)
		}
	}
	return blocks, images, nil
}

// textAttachment is the text block of a text file or PDF.
func textAttachment(name, mediaType, text string) llm.Block {
	if len(text) > MaxAttachmentText {
		cut := MaxAttachmentText
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + fmt.Sprintf("\n[cut: only the first %d bytes of %s are included]", cut, name)
	}
	return llm.Block{Type: llm.BlockText, Text: fmt.Sprintf("<attachment filename=%q media_type=%q>\n%s\n</attachment>", name, mediaType, text)}
}

// pdfText extracts a PDF's text, page by page (github.com/ledongthuc/pdf). A malformed file
// is an error, never a panic.
func pdfText(data []byte) (text string, err error) {
	if !bytes.HasPrefix(data, []byte("%PDF-")) {
		return "", fmt.Errorf("it does not start with %%PDF-")
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("malformed PDF: %v", p)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i := 1; i <= min(r.NumPage(), maxPDFPages); i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		t, err := p.GetPlainText(nil) // nil: the page's own fonts (names are per page)
		if err != nil {
			return "", fmt.Errorf("page %d: %w", i, err)
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(strings.TrimSpace(t))
		if b.Len() > MaxAttachmentText {
			break
		}
	}
	return b.String(), nil
}

// attachmentTokens is the token estimate of attachment blocks (about 4 characters per token,
// 1,000 per image), matching the context window's.
func attachmentTokens(blocks []llm.Block) int {
	n := 0
	for _, b := range blocks {
		if b.Type == llm.BlockImage {
			n += 1000
		} else {
			n += EstimateTokens(b.Text)
		}
	}
	return n
}
