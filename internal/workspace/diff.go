package workspace

import (
	"fmt"
	"strings"
)

// diffContext is how many unchanged lines surround each change in a unified diff hunk.
const diffContext = 3

// UnifiedDiff returns the unified diff (as `diff -u` writes it) that turns oldText into newText,
// with oldName and newName in the "---" and "+++" headers, or "" when the texts are equal. A
// text whose last line has no newline is marked "\ No newline at end of file" after that line,
// so that applying the diff to oldText gives newText byte for byte. The edit script is a
// shortest one (Myers' algorithm) over lines.
func UnifiedDiff(oldName, newName, oldText, newText string) string {
	if oldText == newText {
		return ""
	}
	a, b := splitLines(oldText), splitLines(newText)
	ops := myers(a, b)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", oldName, newName)
	// Group the script into hunks: runs of changes with at most 2*diffContext equal lines
	// between them, each with diffContext equal lines around.
	i := 0
	for i < len(ops) {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			break
		}
		start := max(0, i-diffContext)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			j := end
			for j < len(ops) && ops[j].kind == ' ' {
				j++
			}
			if j == len(ops) || j-end > 2*diffContext {
				end = min(j, end+diffContext)
				break
			}
			end = j
		}
		writeHunk(&sb, ops[start:end], a, b)
		i = end
	}
	return sb.String()
}

type diffOp struct {
	kind byte // ' ', '-', '+'
	a, b int  // line indexes in a (for ' ' and '-') and b (for ' ' and '+')
}

func writeHunk(sb *strings.Builder, ops []diffOp, a, b []string) {
	// Start lines are those of the first line of the hunk on each side; a side with no lines
	// in the hunk names the line before it (0 at the start), as diff -u does.
	aStart, bStart, aLen, bLen := -1, -1, 0, 0
	for _, op := range ops {
		if op.kind != '+' {
			if aStart < 0 {
				aStart = op.a
			}
			aLen++
		}
		if op.kind != '-' {
			if bStart < 0 {
				bStart = op.b
			}
			bLen++
		}
	}
	if aStart < 0 {
		aStart = ops[0].a // the '+' ops carry the a position they are inserted before
	}
	if bStart < 0 {
		bStart = ops[0].b
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(aStart+1, aLen), hunkRange(bStart+1, bLen))
	for _, op := range ops {
		line := ""
		switch op.kind {
		case '+':
			line = b[op.b]
		default:
			line = a[op.a]
		}
		sb.WriteByte(op.kind)
		sb.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

func hunkRange(start, n int) string {
	if n == 1 {
		return fmt.Sprint(start)
	}
	if n == 0 {
		start-- // an empty range names the line before it
	}
	return fmt.Sprintf("%d,%d", start, n)
}

// splitLines splits s into lines that keep their "\n"; the last may lack it.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// myers returns a shortest edit script turning a into b. Every op carries its positions: an
// insertion's a is the index of the a line it comes before, a deletion's b likewise. Its work
// is bounded: at most maxEdits edits are searched and at most maxDiffWork lines compared; past
// either, every line is replaced (still a correct diff). The search keeps, per edit step d,
// only the 2d+3 diagonals it can have reached, so its memory is about maxEdits² ints at most.
func myers(a, b []string) []diffOp {
	n, m := len(a), len(b)
	maxD := min(n+m, maxEdits)
	offset := maxD + 1
	v := make([]int, 2*maxD+3)
	var trace [][]int
	work := 0
	for d := 0; d <= maxD && work <= maxDiffWork; d++ {
		trace = append(trace, append([]int(nil), v[offset-d-1:offset+d+2]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[offset+k-1] < v[offset+k+1]) {
				x = v[offset+k+1]
			} else {
				x = v[offset+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
				work++
			}
			work++
			v[offset+k] = x
			if x >= n && y >= m {
				return backtrack(trace, a, b, d)
			}
		}
	}
	ops := make([]diffOp, 0, n+m)
	for i := range a {
		ops = append(ops, diffOp{kind: '-', a: i, b: 0})
	}
	for j := range b {
		ops = append(ops, diffOp{kind: '+', a: n, b: j})
	}
	return ops
}

const (
	// maxEdits bounds the edit distance Myers' algorithm searches (its memory grows with its
	// square).
	maxEdits = 500
	// maxDiffWork bounds the line comparisons and diagonal steps of one diff (its time).
	maxDiffWork = 1_000_000
)

// backtrack walks the trace back from step dEnd; trace[d] holds diagonals -d-1..d+1 as they
// were before step d.
func backtrack(trace [][]int, a, b []string, dEnd int) []diffOp {
	x, y := len(a), len(b)
	var rev []diffOp
	for d := dEnd; d > 0; d-- {
		v := trace[d]
		at := func(k int) int { return v[k+d+1] }
		k := x - y
		var prevK int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := at(prevK)
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x--
			y--
			rev = append(rev, diffOp{kind: ' ', a: x, b: y})
		}
		if x == prevX {
			y--
			rev = append(rev, diffOp{kind: '+', a: x, b: y})
		} else {
			x--
			rev = append(rev, diffOp{kind: '-', a: x, b: y})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, diffOp{kind: ' ', a: x, b: y})
	}
	ops := make([]diffOp, len(rev))
	for i, op := range rev {
		ops[len(rev)-1-i] = op
	}
	return ops
}
