package docs_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/authority/authoritytest"
)

var updateSecurity = flag.Bool("update-security", false, "rewrite docs/operations.md's conformance table from authority/authoritytest")

// The markers around docs/operations.md's conformance table.
const (
	tableBegin = "<!-- conformance table: go test ./docs -run SecurityTable -update-security -->\n"
	tableEnd   = "<!-- end of the conformance table -->\n"
)

// conformanceTable is docs/operations.md's table of surface × caller ×
// action, written from the conformance suite: a row per case, a column
// per surface, each cell the subtest that checks it, or a dash where the
// surface offers the caller no way to ask.
func conformanceTable() string {
	var b strings.Builder
	surfaces := authoritytest.Surfaces()
	b.WriteString("| case | expected |")
	for _, s := range surfaces {
		b.WriteString(" " + s.Name + " |")
	}
	b.WriteString("\n|---|---|")
	for range surfaces {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, c := range authoritytest.Cases() {
		want := "allowed"
		if c.Want != "" {
			want = "refused (`" + string(c.Want) + "`)"
		}
		b.WriteString("| " + c.Name + " | " + want + " |")
		for _, s := range surfaces {
			if s.Skip(c) != "" {
				b.WriteString(" — |")
			} else {
				b.WriteString(" ✓ |")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString("\nEach ✓ is the subtest named after the case of the surface's test:\n\n")
	for _, s := range surfaces {
		b.WriteString("- " + s.Name + ": `" + s.Test + "` (package `" + s.Package + "`)\n")
	}
	return b.String()
}

// TestTheSecurityTableIsTheConformanceSuite checks that the table of
// docs/operations.md's security section says exactly what the
// conformance suite runs: every case, every surface, and which surface
// runs which case.
func TestTheSecurityTableIsTheConformanceSuite(t *testing.T) {
	t.Parallel()
	const path = "operations.md"
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Every surface's test exists, in its package: Conform checks that it
	// runs under that name.
	for _, s := range authoritytest.Surfaces() {
		dir := "../" + s.Package
		if s.Package == "interlock" {
			dir = ".."
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
		found := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err == nil && strings.Contains(string(b), "func "+s.Test+"(t *testing.T)") {
				found = true
			}
		}
		if !found {
			t.Errorf("the %s's test %s is in no test file of %s", s.Name, s.Test, dir)
		}
	}
	text := string(doc)
	before, rest, ok := strings.Cut(text, tableBegin)
	table, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok || !ok2 {
		t.Fatalf("%s has no conformance table between %q and %q", path, tableBegin, tableEnd)
	}
	want := "\n" + conformanceTable() + "\n"
	if table == want {
		return
	}
	if *updateSecurity {
		if err := os.WriteFile(path, []byte(before+tableBegin+want+tableEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's conformance table is not the suite's; run go test ./docs -run SecurityTable -update-security. Want:\n%s", path, want)
}
