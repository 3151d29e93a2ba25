package docs_test

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryGoSnippetOfTheDocsIsQuotedFromCompiledCode: every ```go block
// of the repository's Markdown (the README, docs/, the examples') is a
// quotation of a Go file that the build compiles (docs/flows_example_test.go,
// examples/service/main.go, ...): its lines appear there one after the
// other, each with the same indentation added. So a snippet compiles as
// it is shown, in the context of the file it comes from, and a change of
// the API that breaks it breaks the build.
func TestEveryGoSnippetOfTheDocsIsQuotedFromCompiledCode(t *testing.T) {
	t.Parallel()
	root := ".."
	var docs, sources []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".md":
			docs = append(docs, path)
		case ".go":
			sources = append(sources, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	code := map[string][]string{}
	for _, path := range sources {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if ignored.Match(b) {
			continue // not built
		}
		code[path] = strings.Split(string(b), "\n")
	}
	blocks := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range goSnippets(b) {
			blocks++
			if quotedIn(s.lines, code) == "" {
				rel, _ := filepath.Rel(root, doc)
				t.Errorf("%s:%d: this ```go block is quoted from no Go file of the build; write it where it compiles "+
					"(docs/flows_example_test.go, or the example it describes) and quote it whole:\n%s",
					rel, s.line, strings.Join(s.lines, "\n"))
			}
		}
	}
	if blocks < 10 {
		t.Fatalf("found %d ```go blocks in %d Markdown files; the walk misses the docs", blocks, len(docs))
	}
}

// ignored matches a Go file's build constraint that keeps it out of
// every build.
var ignored = regexp.MustCompile(`(?m)^//go:build ignore$`)

// snippet is a ```go block: its first line's number and its lines.
type snippet struct {
	line  int
	lines []string
}

// goSnippets returns the ```go blocks of a Markdown document.
func goSnippets(doc []byte) []snippet {
	var out []snippet
	var cur *snippet
	indent := ""
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && trimmed == "```go":
			indent = line[:len(line)-len(trimmed)] // a block in a list item
			cur = &snippet{line: n + 1}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, strings.TrimPrefix(line, indent))
		}
	}
	return out
}

// quotedIn returns the file of code whose lines hold lines one after the
// other, each with the same indentation added (blank lines blank), or "".
func quotedIn(lines []string, code map[string][]string) string {
	if len(lines) == 0 {
		return ""
	}
	for path, src := range code {
		for i := 0; i+len(lines) <= len(src); i++ {
			prefix, ok := strings.CutSuffix(src[i], lines[0])
			if !ok || strings.Trim(prefix, "\t ") != "" || lines[0] == "" {
				continue
			}
			match := true
			for j, l := range lines[1:] {
				got := src[i+1+j]
				if l == "" && strings.TrimSpace(got) == "" || got == prefix+l {
					continue
				}
				match = false
				break
			}
			if match {
				return path
			}
		}
	}
	return ""
}
