package httpapi

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestEveryProblemCodeHasASectionInTheDocs checks that the type URI of
// every problem, ProblemType + code, names a section of docs/http.md: a
// heading whose GitHub anchor is the code.
func TestEveryProblemCodeHasASectionInTheDocs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(doc)
	var missing []string
	for code := range titles {
		if !anchors[code] {
			missing = append(missing, code)
		}
	}
	slices.Sort(missing)
	for _, code := range missing {
		t.Errorf("problem code %s: docs/http.md has no heading with the anchor #%s (%s%s leads nowhere); add \"### %s\" under \"## Problems\"", code, code, ProblemType, code, code)
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown document: the heading's text in lower case, spaces turned into
// hyphens, every character but letters, digits, hyphens and underscores
// dropped; a repeated anchor gets -1, -2, ... Lines in fenced code blocks
// are not headings.
func headingAnchors(doc []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t")
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) > 3 {
			continue // indented code
		}
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" {
			fence = f
			continue
		}
		level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
		if level < 1 || level > 6 || len(trimmed) > level && trimmed[level] != ' ' {
			continue
		}
		text := strings.TrimSpace(trimmed[level:])
		if closed := strings.TrimRight(text, "#"); closed == "" || strings.HasSuffix(closed, " ") {
			text = strings.TrimSpace(closed) // a closing sequence of #s
		}
		anchor := anchorOf(text)
		if n := seen[anchor]; n > 0 {
			seen[anchor] = n + 1
			anchor += "-" + strconv.Itoa(n)
		} else {
			seen[anchor] = 1
		}
		anchors[anchor] = true
	}
	return anchors
}

// fenceOf returns the fence a line opens (``` or ~~~, or longer), or "".
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// anchorOf returns the GitHub anchor of a heading's text.
func anchorOf(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
