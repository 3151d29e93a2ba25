package people

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// fileHeader begins a directory file that [AddPerson] creates.
const fileHeader = `# Interlock's directory of people (interlock serve --people FILE).
# Each person holds the SHA-256 of their bearer token, never the token.
# Change it with: interlock people add|remove|rotate-token --people FILE
`

// ReadFile reads and parses the directory file at path.
func ReadFile(path string) (*Directory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("people: reading the directory: %w", err)
	}
	return Parse(b, path)
}

// AddPerson adds p to the directory file at path, creating the file
// (mode 0600) if it does not exist. With token set, p gets a new bearer
// token, returned: the file keeps only its SHA-256, so it cannot be shown
// again. The person is appended to the file as it is, comments included;
// the file is replaced whole, by a rename.
func AddPerson(path string, p Person, token bool) (string, error) {
	if err := CheckName(p.Name); err != nil {
		return "", fmt.Errorf("people: %w", err)
	}
	var tok string
	if token {
		if p.TokenSHA256 != "" {
			return "", errors.New("people: AddPerson with a new token needs a person without tokenSha256")
		}
		tok = NewToken()
		p.TokenSHA256 = HashToken(tok)
	}
	err := edit(path, true, func(d *Directory, seq *yaml.Node) error {
		if _, ok := d.Person(p.Name); ok {
			return fmt.Errorf("%s already has a person named %q; remove them first, or give them a new token with `interlock people rotate-token %s`", path, p.Name, p.Name)
		}
		var n yaml.Node
		if err := n.Encode(p); err != nil {
			return fmt.Errorf("encoding %s: %w", p.Name, err)
		}
		seq.Style = 0 // a flow list ("[]") becomes a block list
		seq.Content = append(seq.Content, &n)
		return nil
	})
	if err != nil {
		return "", err
	}
	return tok, nil
}

// RemovePerson removes the person called name from the directory file at
// path: their token stops working once the directory is applied again.
// The other people and the file's comments stay.
func RemovePerson(path, name string) error {
	return edit(path, false, func(d *Directory, seq *yaml.Node) error {
		i, err := indexOf(d, path, name)
		if err != nil {
			return err
		}
		if i == 0 && len(seq.Content) > 1 {
			// Comments before the first person are the list's.
			seq.Content[1].HeadComment = strings.TrimSpace(seq.Content[0].HeadComment + "\n" + seq.Content[1].HeadComment)
		}
		seq.Content = slices.Delete(seq.Content, i, i+1)
		return nil
	})
}

// RotateToken gives the person called name a new bearer token in the
// directory file at path, and returns it: the old token stops working once
// the directory is applied again.
func RotateToken(path, name string) (string, error) {
	tok := NewToken()
	err := edit(path, false, func(d *Directory, seq *yaml.Node) error {
		i, err := indexOf(d, path, name)
		if err != nil {
			return err
		}
		m := seq.Content[i]
		if m.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: person %s is not a YAML mapping; edit the file by hand", path, name)
		}
		for j := 0; j+1 < len(m.Content); j += 2 {
			if m.Content[j].Value == "tokenSha256" {
				m.Content[j+1].SetString(HashToken(tok))
				return nil
			}
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "tokenSha256"}, &yaml.Node{Kind: yaml.ScalarNode, Value: HashToken(tok)})
		return nil
	})
	if err != nil {
		return "", err
	}
	return tok, nil
}

// indexOf is the index of the person called name in d, or an error
// listing whom it has.
func indexOf(d *Directory, path, name string) (int, error) {
	i, ok := d.byName[name]
	if ok {
		return i, nil
	}
	names := make([]string, 0, len(d.people))
	for _, p := range d.people {
		names = append(names, p.Name)
	}
	if len(names) == 0 {
		return 0, fmt.Errorf("%s has no person named %q: it has nobody", path, name)
	}
	return 0, fmt.Errorf("%s has no person named %q; it has %s", path, name, strings.Join(names, ", "))
}

// edit reads the directory file at path (create: a missing file is an
// empty one), lets change edit its list of people, checks the result
// and writes it back. change's errors are the file's.
func edit(path string, create bool, change func(d *Directory, people *yaml.Node) error) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		b, err = []byte(fileHeader+"people: []\n"), nil
	}
	if err != nil {
		return fmt.Errorf("people: reading the directory: %w", err)
	}
	d, err := Parse(b, path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("people: %s: %w", path, err)
	}
	if len(doc.Content) == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, HeadComment: strings.TrimSpace(string(b)), Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("people: %s: not a YAML mapping with a list `people`", path)
	}
	var seq *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "people" {
			seq = root.Content[i+1]
		}
	}
	if seq == nil || seq.Kind == yaml.ScalarNode && seq.Tag == "!!null" {
		if seq == nil {
			seq = &yaml.Node{}
			root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "people"}, seq)
		}
		*seq = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	}
	if seq.Kind != yaml.SequenceNode || len(seq.Content) != d.Len() {
		return fmt.Errorf("people: %s: `people` is not a plain YAML list (anchors or aliases?); edit the file by hand", path)
	}
	if err := change(d, seq); err != nil {
		return fmt.Errorf("people: %w", err)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("people: encoding %s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("people: encoding %s: %w", path, err)
	}
	if _, err := Parse(out.Bytes(), path); err != nil {
		return fmt.Errorf("people: %s: the change would not leave a directory that parses (%w); edit the file by hand", path, err)
	}
	return WriteFile(path, out.Bytes())
}

// WriteFile writes content to a new file, mode 0600, beside path and
// renames it over path, so that a reader never sees half of it.
func WriteFile(path string, content []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("people: writing %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("people: writing %s: %w", path, err)
	}
	if _, err := f.Write(content); err != nil {
		return fmt.Errorf("people: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("people: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("people: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("people: writing %s: %w", path, err)
	}
	ok = true
	return nil
}
