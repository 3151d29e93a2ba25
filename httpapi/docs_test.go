package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/interlockhq/interlock/docs"
	"github.com/interlockhq/interlock/protocol"
)

// TestEveryProblemTypeLeadsToASectionOfTheDocs checks that the type URI
// of every problem the API can answer with names a heading of
// docs/http.md: the API's own codes, the 413 of a body too large, every
// refusal code of the wire contract, and a refusal code this version does
// not know (a newer worker's), which leads to the Problems section.
func TestEveryProblemTypeLeadsToASectionOfTheDocs(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(doc)
	var problems []Problem
	for code := range titles {
		problems = append(problems, newProblem(code, "what happened"))
	}
	problems = append(problems, tooLarge("a body of 2 MiB; the limit is 1 MiB"))
	for _, code := range append(contractRefusalCodes(t), "a_code_of_a_newer_worker") {
		problems = append(problems, refusal(protocol.Refused{Flow: "refund", Run: "r-1", Code: protocol.Code(code), Message: "refused"}))
	}
	slices.SortFunc(problems, func(a, b Problem) int { return strings.Compare(a.Code, b.Code) })
	for _, p := range problems {
		u, err := url.Parse(p.Type)
		if err != nil || u.Scheme != "https" || u.Host != "github.com" || !strings.HasSuffix(u.Path, "/docs/http.md") {
			t.Errorf("problem %s: type %q is not a link to docs/http.md (%v)", p.Code, p.Type, err)
			continue
		}
		if !anchors[u.Fragment] {
			t.Errorf("problem %s: type %q leads to #%s, which is no heading of docs/http.md; add \"### %s\" under \"## Problems\", or link the code elsewhere", p.Code, p.Type, u.Fragment, u.Fragment)
		}
	}
}

// contractRefusalCodes returns the refusal codes of the wire contract
// (docs/schema/defs.json): every code a refused event may carry.
func contractRefusalCodes(t *testing.T) []string {
	t.Helper()
	b, err := docs.Schema("defs.json")
	if err != nil {
		t.Fatal(err)
	}
	var defs struct {
		Defs struct {
			RefusalCode struct {
				Enum []string `json:"enum"`
			} `json:"refusalCode"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &defs); err != nil || len(defs.Defs.RefusalCode.Enum) == 0 {
		t.Fatalf("docs/schema/defs.json has no $defs.refusalCode.enum: %v", err)
	}
	return defs.Defs.RefusalCode.Enum
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
