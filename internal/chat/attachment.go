package chat

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/agentry/agentry/internal/apperr"
	"github.com/agentry/agentry/internal/extract"
	"github.com/agentry/agentry/internal/llm"
)

// Attachment limits of one message. (AGENTRY_MAX_BODY_BYTES caps the whole GraphQL request
// first: attachments travel base64-encoded, a third larger than the file.)
const (
	// MaxAttachments is the most files one message may carry.
	MaxAttachments = 5
	// MaxAttachmentBytes caps one file.
	MaxAttachmentBytes = extract.MaxFileBytes
	// MaxAttachmentsBytes caps the files of one message together.
	MaxAttachmentsBytes = 10 << 20
	// MaxAttachmentText caps the text kept from one text file or PDF (longer text is cut, with a
	// note saying so).
	MaxAttachmentText = extract.MaxText
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
// model takes images). Every file is read by the sandbox (internal/extract: a child process
// under a deadline and CPU and memory limits), never in this process. Every refusal is
// BAD_USER_INPUT naming the attachment and the limit.
func attachmentBlocks(ctx context.Context, sandbox extract.Sandbox, atts []Attachment) ([]llm.Block, bool, error) {
	if len(atts) == 0 {
		return nil, false, nil
	}
	if len(atts) > MaxAttachments {
		return nil, false, apperr.Invalid("attachments", "%d files sent; at most %d are accepted per message", len(atts), MaxAttachments)
	}
	files := make([]extract.File, len(atts))
	names := make([]string, len(atts))
	total := 0
	for i, a := range atts {
		field := fmt.Sprintf("attachments[%d]", i)
		name := strings.TrimSpace(a.Filename)
		if name == "" || utf8.RuneCountInString(name) > 255 || !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\n\r") {
			return nil, false, apperr.Invalid(field+".filename", "must be a file name of 1 to 255 characters")
		}
		names[i] = name
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
		files[i] = extract.File{MediaType: mt, Data: a.Data}
		switch {
		case imageTypes[mt] != "":
			files[i].Kind = extract.KindImage
		case mt == "application/pdf":
			files[i].Kind = extract.KindPDF
		case strings.HasPrefix(mt, "text/") || textTypes[mt]:
			files[i].Kind = extract.KindText
		default:
			return nil, false, apperr.Invalid(field+".mediaType", "%s (%s) is not supported: send text files, PDFs or images (PNG, JPEG, GIF, WebP)", name, mt)
		}
	}
	out, err := sandbox.Run(ctx, files)
	if e := (*extract.Error)(nil); errors.As(err, &e) {
		i := min(e.Index, len(atts)-1)
		return nil, false, apperr.Invalid(fmt.Sprintf("attachments[%d]", i), "%s %s", names[i], e.Reason)
	}
	if err != nil {
		return nil, false, fmt.Errorf("read attachments: %w", err)
	}
	var blocks []llm.Block
	images := false
	for i, o := range out {
		field, name, f := fmt.Sprintf("attachments[%d]", i), names[i], files[i]
		if o.Err != "" {
			return nil, false, apperr.Invalid(field, "%s could not be read: %s", name, o.Err)
		}
		switch f.Kind {
		case extract.KindImage:
			images = true
			blocks = append(blocks, llm.Block{Type: llm.BlockImage, MediaType: f.MediaType, Data: f.Data})
		case extract.KindPDF:
			if strings.TrimSpace(o.Content.Text) == "" {
				return nil, false, apperr.Invalid(field, "%s has no text to extract (a scanned PDF? send its pages as images)", name)
			}
			blocks = append(blocks, textAttachment(name, f.MediaType, o.Content))
		default:
			blocks = append(blocks, textAttachment(name, f.MediaType, o.Content))
		}
	}
	return blocks, images, nil
}

// textAttachment is the text block of a text file or PDF.
func textAttachment(name, mediaType string, c extract.Content) llm.Block {
	text := c.Text
	if c.Cut {
		text += fmt.Sprintf("\n[cut: only the first %d bytes of %s are included]", len(c.Text), name)
	}
	return llm.Block{Type: llm.BlockText, Text: fmt.Sprintf("<attachment filename=%q media_type=%q>\n%s\n</attachment>", name, mediaType, text)}
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
