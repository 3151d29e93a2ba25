package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// LocalCaller is the name of every caller of an API without an auth file:
// the local user, who holds every role.
const LocalCaller = "local"

// MaxNameLen is the longest caller name or role.
const MaxNameLen = people.MaxNameLen

// authRecheck is how often an auth file is checked for changes.
const authRecheck = time.Second

// Caller is someone the API authenticated: their name (the audit stream
// records it as the approver of their decisions), how they were
// authenticated and the approver roles they hold (every role, for
// LocalCaller). It is the authority's caller.
type Caller = authority.Caller

// AuthEntry is one caller in an auth file: a name, the approver roles,
// and the hex SHA-256 of the caller's bearer token (never the token).
type AuthEntry struct {
	Name        string   `yaml:"name"`
	Roles       []string `yaml:"roles"`
	TokenSHA256 string   `yaml:"tokenSha256"`
}

// ParseAuth reads an auth file: a YAML list of entries. Names are 1 to
// MaxNameLen of A-Z a-z 0-9 . _ @ -, unique; roles follow the name rules
// of flows (they are subject tokens); every hash is 64 hex digits and
// names one caller. file names the file in errors.
func ParseAuth(b []byte, file string) ([]AuthEntry, error) {
	var entries []AuthEntry
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&entries); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("httpapi: auth file %s: %w; it is a YAML list of {name, roles, tokenSha256}", file, err)
	}
	names := map[string]bool{}
	hashes := map[string]string{}
	for i := range entries {
		e := &entries[i]
		where := fmt.Sprintf("httpapi: auth file %s, entry %d", file, i+1)
		if err := CheckCallerName(e.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if names[e.Name] {
			return nil, fmt.Errorf("%s: name %q appears twice", where, e.Name)
		}
		names[e.Name] = true
		for _, r := range e.Roles {
			if err := CheckRole(r); err != nil {
				return nil, fmt.Errorf("%s (%s): %w", where, e.Name, err)
			}
		}
		e.TokenSHA256 = strings.ToLower(e.TokenSHA256)
		if h, err := hex.DecodeString(e.TokenSHA256); err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("%s (%s): tokenSha256 must be the 64 hex digits of the token's SHA-256; `interlock auth add` writes it", where, e.Name)
		}
		if other, ok := hashes[e.TokenSHA256]; ok {
			return nil, fmt.Errorf("%s (%s): tokenSha256 is also %s's; every caller needs a token of their own", where, e.Name, other)
		}
		hashes[e.TokenSHA256] = e.Name
	}
	return entries, nil
}

// CheckCallerName reports whether s is a valid caller name: 1 to
// MaxNameLen of A-Z a-z 0-9 . _ @ -. It is [people.CheckName].
func CheckCallerName(s string) error { return people.CheckName(s) }

// CheckRole reports whether s is a valid approver role: 1 to MaxNameLen of
// A-Z a-z 0-9 _ -, as it is a NATS subject token. It is
// [people.CheckRole].
func CheckRole(s string) error { return people.CheckRole(s) }

// HashToken returns the hex SHA-256 of a bearer token, as an auth file
// holds it. It is [people.HashToken].
func HashToken(token string) string { return people.HashToken(token) }

// NewToken returns a fresh bearer token: 32 random bytes, base64url
// without padding. It is [people.NewToken].
func NewToken() string { return people.NewToken() }

// AuthFile holds the callers of an auth file, and reads the file again
// when it changes, so that `interlock auth add` needs no restart. It is
// read as a directory of people (see [AuthFile.Directory]): the people
// directory (package people) replaces it.
type AuthFile struct {
	path string

	mu      sync.Mutex
	dir     *people.Directory
	stamp   fileStamp
	checked time.Time
}

// fileStamp tells whether a file changed.
type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadAuth reads the auth file at path.
func LoadAuth(path string) (*AuthFile, error) {
	a := &AuthFile{path: path}
	if _, err := a.reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// AuthDirectory is the directory of people of an auth file's entries:
// each caller a person with their roles and token hash. file names it.
func AuthDirectory(entries []AuthEntry, file string) (*people.Directory, error) {
	ps := make([]people.Person, 0, len(entries))
	for _, e := range entries {
		ps = append(ps, people.Person{Name: e.Name, Roles: slices.Clone(e.Roles), TokenSHA256: e.TokenSHA256})
	}
	d, err := people.New(file, ps, nil)
	if err != nil {
		return nil, fmt.Errorf("httpapi: auth file %s: %w", file, err)
	}
	return d, nil
}

// Path is the file's path.
func (a *AuthFile) Path() string { return a.path }

// Len is how many callers the file holds.
func (a *AuthFile) Len() int { return a.Directory().Len() }

// Directory is the file's callers as a directory of people, as last read.
func (a *AuthFile) Directory() *people.Directory {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dir
}

// Refresh reads the file again if it changed since it was last read, at
// most once a second, and reports whether it did. A file that no longer
// parses is an error, and the callers read before stay.
func (a *AuthFile) Refresh() (bool, error) {
	a.mu.Lock()
	due := time.Since(a.checked) >= authRecheck
	if due {
		a.checked = time.Now()
	}
	a.mu.Unlock()
	if !due {
		return false, nil
	}
	return a.reload()
}

func (a *AuthFile) reload() (bool, error) {
	st, err := os.Stat(a.path)
	if err != nil {
		return false, fmt.Errorf("httpapi: auth file: %w", err)
	}
	stamp := fileStamp{mod: st.ModTime(), size: st.Size()}
	a.mu.Lock()
	same := stamp == a.stamp && a.dir != nil
	a.mu.Unlock()
	if same {
		return false, nil
	}
	b, err := os.ReadFile(a.path)
	if err != nil {
		return false, fmt.Errorf("httpapi: auth file: %w", err)
	}
	d, err := ParseAuthDirectory(b, a.path)
	if err != nil {
		// Keep the callers read before, and say so once per change.
		a.mu.Lock()
		a.stamp = stamp
		a.mu.Unlock()
		return false, err
	}
	a.mu.Lock()
	a.dir, a.stamp = d, stamp
	a.mu.Unlock()
	return true, nil
}

// ParseAuthDirectory reads an auth file (see [ParseAuth]) as a directory
// of people.
func ParseAuthDirectory(b []byte, file string) (*people.Directory, error) {
	entries, err := ParseAuth(b, file)
	if err != nil {
		return nil, err
	}
	return AuthDirectory(entries, file)
}

// Authenticate returns the caller holding token. Every caller's hash is
// compared, in constant time, whoever matches.
func (a *AuthFile) Authenticate(token string) (Caller, bool) {
	return Authenticate(a.Directory(), token)
}

// Authenticate returns the person of d holding token, as a caller.
func Authenticate(d *people.Directory, token string) (Caller, bool) {
	p, ok := d.ByToken(token)
	if !ok {
		return Caller{}, false
	}
	return Caller{Name: p.Name, Method: protocol.AuthToken, Roles: p.Roles}, true
}

// authFileHeader begins an auth file that AddCaller creates.
const authFileHeader = `# Callers of Interlock's HTTP API (interlock serve --auth-file).
# Each holds the SHA-256 of a bearer token, never the token; add callers
# with: interlock auth add NAME --role ROLE --auth-file FILE
`

// AddCaller adds a caller with roles to the auth file at path, creating it
// (mode 0600) if needed, and returns the caller's new token: the file keeps
// only its hash, so the token cannot be shown again. The entry is appended
// to the file as it is, comments included; the file is replaced whole, by
// a rename, so that a reader never sees half of it.
func AddCaller(path, name string, roles []string) (string, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("httpapi: reading auth file: %w", err)
	}
	if len(old) == 0 {
		old = []byte(authFileHeader)
	}
	entries, err := ParseAuth(old, path)
	if err != nil {
		return "", err
	}
	if err := CheckCallerName(name); err != nil {
		return "", fmt.Errorf("httpapi: %w", err)
	}
	for _, e := range entries {
		if e.Name == name {
			return "", fmt.Errorf("httpapi: %s already has a caller named %q; remove them first to give them a new token (interlock auth remove %s --auth-file %s)", path, name, name, path)
		}
	}
	for _, r := range roles {
		if err := CheckRole(r); err != nil {
			return "", fmt.Errorf("httpapi: %w", err)
		}
	}
	token := NewToken()
	entry := AuthEntry{Name: name, Roles: slices.Clone(roles), TokenSHA256: HashToken(token)}
	if entry.Roles == nil {
		entry.Roles = []string{}
	}
	item, err := yaml.Marshal([]AuthEntry{entry})
	if err != nil {
		return "", fmt.Errorf("httpapi: encoding the entry: %w", err)
	}
	content := slices.Clone(old)
	if len(content) > 0 && content[len(content)-1] != '\n' {
		content = append(content, '\n')
	}
	content = append(content, item...)
	if got, err := ParseAuth(content, path); err != nil || len(got) != len(entries)+1 {
		// Not a block list the entry can follow (a flow list such as
		// "[]"): write the list again, without its comments.
		if content, err = yaml.Marshal(append(entries, entry)); err != nil {
			return "", fmt.Errorf("httpapi: encoding the auth file: %w", err)
		}
		content = append([]byte(authFileHeader), content...)
	}
	if err := writeFileAtomic(path, content); err != nil {
		return "", err
	}
	return token, nil
}

// ReadAuthFile reads the callers of the auth file at path, as [ParseAuth]
// checks them.
func ReadAuthFile(path string) ([]AuthEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("httpapi: reading auth file: %w", err)
	}
	return ParseAuth(b, path)
}

// RemoveCaller removes the caller called name from the auth file at path:
// their token stops working once a server reads the file again (see
// [AuthFile.Refresh]). The other callers and the file's comments stay
// (the comments before the first caller are the file's, and stay too);
// the file is replaced whole, by a rename, mode 0600.
func RemoveCaller(path, name string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("httpapi: reading auth file: %w", err)
	}
	entries, err := ParseAuth(b, path)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(entries, func(e AuthEntry) bool { return e.Name == name })
	if i < 0 {
		names := make([]string, len(entries))
		for j, e := range entries {
			names[j] = e.Name
		}
		if len(names) == 0 {
			return fmt.Errorf("httpapi: %s has no caller named %q: it has no callers", path, name)
		}
		return fmt.Errorf("httpapi: %s has no caller named %q; it has %s", path, name, strings.Join(names, ", "))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.SequenceNode || len(doc.Content[0].Content) != len(entries) {
		return fmt.Errorf("httpapi: auth file %s: not a YAML list of callers (%v)", path, err)
	}
	seq := doc.Content[0]
	if i == 0 {
		// The comments before the first caller are the file's header.
		header := seq.Content[0].HeadComment
		if len(seq.Content) > 1 {
			seq.Content[1].HeadComment = strings.TrimSpace(header + "\n" + seq.Content[1].HeadComment)
		} else {
			seq.HeadComment = strings.TrimSpace(header + "\n" + seq.HeadComment)
		}
	}
	seq.Content = slices.Delete(seq.Content, i, i+1)
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("httpapi: encoding the auth file: %w", err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("httpapi: encoding the auth file: %w", err)
	}
	if got, err := ParseAuth(out.Bytes(), path); err != nil || len(got) != len(entries)-1 {
		return fmt.Errorf("httpapi: auth file %s: removing %q would not leave the other callers as they are (%v); edit the file by hand", path, name, err)
	}
	return writeFileAtomic(path, out.Bytes())
}

// writeFileAtomic writes content to a new file, mode 0600, beside path and
// renames it over path.
func writeFileAtomic(path string, content []byte) error {
	if err := people.WriteFile(path, content); err != nil {
		return fmt.Errorf("httpapi: writing auth file: %w", err)
	}
	return nil
}
