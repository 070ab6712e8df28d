// Package extracttest builds small PDF files for tests of what reads attachments.
package extracttest

import (
	"bytes"
	"fmt"
)

// PDF builds a PDF of the given objects (numbered from 1, the first the catalog) with a correct
// cross-reference table.
func PDF(objs ...string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// ContentPDF is a one-page PDF whose page shows content (a content stream) with Helvetica as /F1.
func ContentPDF(content string) []byte {
	return PDF(
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	)
}

// TextPDF is a one-page PDF showing text in Helvetica ("" shows nothing).
func TextPDF(text string) []byte {
	return ContentPDF(fmt.Sprintf("BT /F1 18 Tf 72 720 Td (%s) Tj ET", text))
}

// SelfReferencingPDF is a hostile file: 238 bytes whose page tree lists itself as
// its only kid (a reader that follows kids without remembering them never ends).
func SelfReferencingPDF() []byte {
	return PDF("<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [2 0 R] /Count 1 >>")
}
