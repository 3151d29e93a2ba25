package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestAddingAKindListsEverySurfaceTemplate keeps docs/adding-a-kind.md
// true: every file its table names exists (but the example kind's own),
// and every surface's template of the kinds (a kinds.go, or the inbox's
// kinds.html) is in the table.
func TestAddingAKindListsEverySurfaceTemplate(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("adding-a-kind.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(doc, -1) {
		listed[m[1]] = true
	}
	if len(listed) < 10 {
		t.Fatalf("adding-a-kind.md lists %d files; the table was not found", len(listed))
	}
	for f := range listed {
		if strings.Contains(f, "rating") {
			continue // the example kind's own file
		}
		if _, err := os.Stat(filepath.Join("..", f)); err != nil {
			t.Errorf("adding-a-kind.md names %s, which does not exist: %v", f, err)
		}
	}
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.Name() != "kinds.go" && d.Name() != "kinds.html" {
			return nil
		}
		rel, _ := filepath.Rel("..", path)
		if rel == "protocol/kinds.go" || listed[filepath.ToSlash(rel)] {
			return nil
		}
		t.Errorf("%s is a template of the kinds that adding-a-kind.md does not list", rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNoSurfaceSwitchesOnAKindsName keeps adding-a-kind.md's promise:
// outside the protocol package, the engine and each surface's kinds.go,
// no Go code names an interrupt kind. A surface asks protocol.SpecOf or
// its own kind views.
func TestNoSurfaceSwitchesOnAKindsName(t *testing.T) {
	t.Parallel()
	named := regexp.MustCompile(`\bKind(Question|Choice|Approval)\b|(==|!=|case) *"(question|choice|approval)"`)
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			switch {
			case path == "..":
			case strings.HasPrefix(d.Name(), "."), d.Name() == "node_modules", d.Name() == "testdata",
				rel == "protocol", rel == "engine", rel == "bench", rel == "clients",
				rel == "authority/authoritytest", // a test fixture, which builds interrupts of the kinds
				rel == "internal/soak":           // the fault soak, which asks for approvals as an agent does
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || d.Name() == "kinds.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if named.MatchString(line) {
				t.Errorf("%s:%d names an interrupt kind: ask protocol.SpecOf, or move it to the package's kinds.go\n\t%s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
