package docs_test

import (
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/webhook"
)

// olderWords are the older names of the directory of people: the auth
// file and its commands.
var olderWords = regexp.MustCompile(`\bauth (add|list|remove)\b|-auth-file\b|\bauth files?\b|INTERLOCK_AUTH_FILE`)

// TestTheDocsSayOneWordForTheDirectoryOfPeople: the directory of people
// (`interlock people add`, `--people`) is the current word everywhere a
// newcomer reads; the auth file and `interlock auth` appear only where
// the line or its section says they are the older way.
func TestTheDocsSayOneWordForTheDirectoryOfPeople(t *testing.T) {
	files := []string{"../README.md", "../clients/python/README.md", "../clients/typescript/README.md"}
	for _, pattern := range []string{"*.md", "../examples/*/README.md", "../examples/*/*.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		heading := ""
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "#") {
				heading = line
			}
			if olderWords.MatchString(line) && !strings.Contains(strings.ToLower(line+" "+heading), "older") {
				t.Errorf("%s:%d names the older auth file outside a section about the older files (say interlock people add, --people):\n\t%s", f, i+1, line)
			}
		}
	}
}

// madeInTheRoot finds the files a newcomer following the docs makes in the
// repository's root: a bare file name given to a flag that names a file
// they write, or redirected to.
var madeInTheRoot = regexp.MustCompile(`(?:--people|--smtp-config|--webhooks|--slack-config|--auth-file|>)\s+([A-Za-z0-9_-]+\.ya?ml)\b`)

// TestFilesTheDocsMakeInTheRootAreIgnoredByGit: people.yaml (with token
// hashes), smtp.yaml, webhooks.yaml (with secrets) and the like, made in
// the repository's root when following the docs, are in .gitignore.
func TestFilesTheDocsMakeInTheRootAreIgnoredByGit(t *testing.T) {
	ignore, err := os.ReadFile("../.gitignore")
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, l := range strings.Split(string(ignore), "\n") {
		ignored[strings.TrimPrefix(strings.TrimSpace(l), "/")] = true
	}
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range append(files, "../README.md") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range madeInTheRoot.FindAllStringSubmatch(string(b), -1) {
			seen[m[1]] = true
			if !ignored[m[1]] {
				t.Errorf("%s makes %s in the root, which .gitignore does not ignore: add /%s", f, m[1], m[1])
			}
		}
	}
	for _, want := range []string{"people.yaml", "smtp.yaml", "webhooks.yaml"} {
		if !seen[want] {
			t.Errorf("no doc makes %s any more: is the pattern still right?", want)
		}
	}
}

// TestTheLocalWebhookWalkSubscribesItsReceiver: the subscriptions file of
// docs/channels.md's local walk parses, its secret resolves from the
// environment the walk sets, and it reaches the receiver's port, not
// Interlock's own.
func TestTheLocalWebhookWalkSubscribesItsReceiver(t *testing.T) {
	doc, err := os.ReadFile("channels.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)cat > webhooks\.yaml <<'YAML'\n(.*?)\nYAML\n`).FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/channels.md has no local webhook walk (cat > webhooks.yaml <<'YAML')")
	}
	set, err := webhook.Parse(m[1], "channels.md")
	if err != nil {
		t.Fatal(err)
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	if err := set.Resolve(func(k string) (string, bool) { return secret, k == "INTERLOCK_WEBHOOK_SECRET" }); err != nil {
		t.Fatal(err)
	}
	subs := set.Subscriptions()
	if len(subs) != 1 || !strings.HasPrefix(subs[0].URL, "http://127.0.0.1:8787/") {
		t.Fatalf("the walk subscribes %+v, want the receiver on 127.0.0.1:8787", subs)
	}
	if !strings.Contains(string(doc), "--egress-allow 127.0.0.1:8787") {
		t.Error("the walk does not allow the receiver's loopback port (--egress-allow 127.0.0.1:8787): the outbound policy would refuse it")
	}
}

// TestAModuleOfYourOwnBuildsWithTheReplaceLineOfTheDocs: docs/flows.md's
// go.mod lines, pointed at this repository, make a module of one's own
// that builds a flow.
func TestAModuleOfYourOwnBuildsWithTheReplaceLineOfTheDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	doc, err := os.ReadFile("flows.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Depending on Interlock")
	m := regexp.MustCompile("(?s)holds:\n\n```\n(.*?)```").FindStringSubmatch(section)
	if m == nil || !strings.Contains(m[1], "replace github.com/interlockhq/interlock => ../interlock") {
		t.Fatal(`docs/flows.md's "Depending on Interlock" shows no go.mod lines with the replace line`)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/myflows\n\ngo 1.26\n\n" + strings.ReplaceAll(m[1], "../interlock", repo)
	main := `package main

import (
	"context"
	"fmt"

	"github.com/interlockhq/interlock/engine"
)

type state struct{ Answer string }

func main() {
	f := engine.NewFlow[state]("mine").Node("ask", func(ctx context.Context, n *engine.Node[state]) error { return nil }).Start("ask").MustBuild()
	fmt.Println(f.Name())
}
`
	for name, body := range map[string]string{"go.mod": mod, "main.go": main} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", os.DevNull, "."}} {
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a module with the docs' go.mod lines: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
