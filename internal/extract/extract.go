// Package extract reads what users upload: the text of PDFs and text files, and the format and
// size of images. Extract is the parser itself; Sandbox runs it in a short-lived child process
// (the agentry binary's hidden `extract` subcommand) under a deadline and CPU and memory limits
// it cannot lift, so a hostile file costs at most those limits and never the calling process.
package extract

import (
	"bytes"
	"fmt"
	"image"
	_ "image/gif"  // image.DecodeConfig and image.Decode read GIF
	_ "image/jpeg" // and JPEG
	_ "image/png"  // and PNG
	"unicode/utf8"

	_ "golang.org/x/image/webp" // and WebP
)

// Limits of what Extract accepts.
const (
	// MaxText caps the text kept from one file; Content.Cut says when more was there.
	MaxText = 200_000
	// MaxImageSide caps an image's width and height in pixels.
	MaxImageSide = 8000
	// MaxImagePixels caps an image's area (width times height).
	MaxImagePixels = 40_000_000
	// maxPDFPages bounds the pages read from one PDF.
	maxPDFPages = 1000
)

// Kind is what a file is read as.
type Kind string

// The kinds of file Extract reads.
const (
	KindText  Kind = "text"  // UTF-8 text, kept as is
	KindPDF   Kind = "pdf"   // a PDF, whose text is extracted
	KindImage Kind = "image" // PNG, JPEG, GIF or WebP, decoded whole to check it
)

// File is one file to read.
type File struct {
	Kind Kind
	// MediaType is the declared type (image/png, ...); an image must be of that format.
	MediaType string
	Data      []byte
}

// Content is what a file yields. Its zero value is a file with no text.
type Content struct {
	// Text is the file's text (text files and PDFs), at most MaxText bytes.
	Text string
	// Cut is set when the text was longer than MaxText.
	Cut bool
	// Width and Height are an image's size in pixels.
	Width, Height int
}

// Error is a file refused: its message says why, in words for the person who sent it. From a
// Sandbox's Run, Index is the file the child could not finish (the ones before it were read).
type Error struct {
	Reason string
	Index  int
}

func (e *Error) Error() string { return e.Reason }

func refuse(format string, args ...any) error { return &Error{Reason: fmt.Sprintf(format, args...)} }

// imageFormats maps image media types to the format names image.DecodeConfig reports.
var imageFormats = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

// Extract reads one file. A file it cannot read is an *Error; it never panics on any input.
// It bounds its own work by the limits above, but is not safe against every hostile input by
// itself (a parser may loop or allocate without end): run it through a Sandbox.
func Extract(f File) (c Content, err error) {
	defer func() {
		if p := recover(); p != nil {
			c, err = Content{}, refuse("the file is malformed (%v)", p)
		}
	}()
	switch f.Kind {
	case KindText:
		if !utf8.Valid(f.Data) || bytes.IndexByte(f.Data, 0) >= 0 {
			return Content{}, refuse("it is not UTF-8 text")
		}
		return textContent(string(f.Data)), nil
	case KindPDF:
		text, err := pdfText(f.Data)
		if err != nil {
			return Content{}, err
		}
		return textContent(text), nil
	case KindImage:
		return imageContent(f.MediaType, f.Data)
	}
	return Content{}, refuse("files of kind %q are not read", f.Kind)
}

// textContent keeps at most MaxText bytes of text, cut at a character boundary.
func textContent(text string) Content {
	if len(text) <= MaxText {
		return Content{Text: text}
	}
	cut := MaxText
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return Content{Text: text[:cut], Cut: true}
}

// imageContent checks an image is of its declared format and size, then decodes it whole so a
// corrupt one is refused here and not by the model's provider.
func imageContent(mediaType string, data []byte) (Content, error) {
	want := imageFormats[mediaType]
	if want == "" {
		return Content{}, refuse("%s is not an image type that is read (PNG, JPEG, GIF, WebP)", mediaType)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Content{}, refuse("it is not a readable image (%v)", err)
	}
	if format != want {
		return Content{}, refuse("it is a %s image, not %s", format, mediaType)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > MaxImageSide || cfg.Height > MaxImageSide || cfg.Width*cfg.Height > MaxImagePixels {
		return Content{}, refuse("it is %dx%d pixels; images of at most %dx%d and %d pixels are accepted", cfg.Width, cfg.Height, MaxImageSide, MaxImageSide, MaxImagePixels)
	}
	if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
		return Content{}, refuse("the image is damaged (%v)", err)
	}
	return Content{Width: cfg.Width, Height: cfg.Height}, nil
}
