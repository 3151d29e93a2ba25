package netaddr_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/interlockhq/interlock/internal/netaddr"
)

func TestIsLoopbackHostFollowsOneRule(t *testing.T) {
	t.Parallel()
	// The note says which of the copies this rule replaced answered
	// otherwise: bus (the NATS listeners), httpapi (the API and its Host
	// check), metrics, mcpserver.
	for _, tt := range []struct {
		host string
		want bool
		note string
	}{
		{host: "127.0.0.1", want: true},
		{host: "127.0.0.2", want: true},
		{host: "127.255.255.254", want: true},
		{host: "::1", want: true},
		{host: "0:0:0:0:0:0:0:1", want: true},
		{host: "[::1]", want: true, note: "metrics said no"},
		{host: "[127.0.0.1]", want: true, note: "metrics said no"},
		{host: "::1%lo", want: true, note: "every copy said no"},
		{host: "[::1%lo0]", want: true, note: "every copy said no"},
		{host: "::ffff:127.0.0.1", want: true},
		{host: "localhost", want: true},
		{host: "LOCALHOST", want: true, note: "metrics said no"},
		{host: "LocalHost", want: true, note: "metrics said no"},
		{host: "localhost.", want: true, note: "bus and metrics said no"},
		{host: "LOCALHOST.", want: true, note: "bus and metrics said no"},

		{host: "", want: false},
		{host: "0.0.0.0", want: false},
		{host: "::", want: false},
		{host: "[::]", want: false},
		{host: "localhost..", want: false},
		{host: ".localhost", want: false, note: "httpapi said yes"},
		{host: "app.localhost", want: false, note: "httpapi said yes"},
		{host: "APP.LOCALHOST.", want: false, note: "httpapi said yes"},
		{host: "127.0.0.1.", want: false, note: "httpapi and mcpserver said yes"},
		{host: "[::1", want: false, note: "bus, httpapi and mcpserver said yes"},
		{host: "::1]", want: false, note: "bus, httpapi and mcpserver said yes"},
		{host: "[[::1]]", want: false, note: "bus, httpapi and mcpserver said yes"},
		{host: "[localhost]", want: false},
		{host: "127.0.0.1%lo", want: false},
		{host: "localhost:8080", want: false},
		{host: "127.0.0.1:8080", want: false},
		{host: " 127.0.0.1", want: false},
		{host: "128.0.0.1", want: false},
		{host: "126.255.255.255", want: false},
		{host: "10.0.0.1", want: false},
		{host: "::2", want: false},
		{host: "fe80::1%lo", want: false},
		{host: "::ffff:10.0.0.1", want: false},
		{host: "example.com", want: false},
		{host: "localhost.example.com", want: false},
		{host: "localhostx", want: false},
	} {
		if got := netaddr.IsLoopbackHost(tt.host); got != tt.want {
			t.Errorf("IsLoopbackHost(%q) = %t, want %t %s", tt.host, got, tt.want, tt.note)
		}
	}
}

// TestTheLoopbackRuleIsWrittenOnlyHere reads every non-test Go file of the
// module and fails on one that decides for itself whether a host is
// loopback: a function named for loopback, a call of an IsLoopback method
// (of net.IP or netip.Addr), or a comparison with the name "localhost".
// Such a file should call netaddr.IsLoopbackHost instead.
func TestTheLoopbackRuleIsWrittenOnlyHere(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") || path == here {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for _, pos := range loopbackCopies(f) {
			p := fset.Position(pos)
			t.Errorf("%s:%d decides by itself whether a host is loopback; call netaddr.IsLoopbackHost", rel, p.Line)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("read %d Go files under %s; expected the whole module", files, root)
	}
}

// loopbackCopies returns where f decides by itself whether a host is
// loopback.
func loopbackCopies(f *ast.File) []token.Pos {
	var at []token.Pos
	isLocalhost := func(e ast.Expr) bool {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return false
		}
		s, err := strconv.Unquote(lit.Value)
		return err == nil && strings.Contains(strings.ToLower(s), "localhost") && !strings.ContainsAny(s, " :/")
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if strings.Contains(strings.ToLower(n.Name.Name), "loopback") {
				at = append(at, n.Pos())
			}
		case *ast.SelectorExpr:
			if n.Sel.Name == "IsLoopback" {
				at = append(at, n.Pos())
			}
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && (isLocalhost(n.X) || isLocalhost(n.Y)) {
				at = append(at, n.Pos())
			}
		case *ast.CaseClause:
			for _, e := range n.List {
				if isLocalhost(e) {
					at = append(at, e.Pos())
				}
			}
		case *ast.CallExpr:
			for _, e := range n.Args {
				if isLocalhost(e) {
					at = append(at, e.Pos())
				}
			}
		}
		return true
	})
	return at
}

// moduleRoot is the directory of the go.mod above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package")
		}
		dir = parent
	}
}
