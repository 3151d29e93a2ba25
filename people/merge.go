package people

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.yaml.in/yaml/v3"
)

// New builds a directory of people and roles, checked as [Parse] checks
// a file; name names its source in errors. Its [Directory.Source] is its
// YAML.
func New(name string, people []Person, roles []Role) (*Directory, error) {
	f := file{People: clonePeople(people), Roles: slices.Clone(roles)}
	if f.People == nil {
		f.People = []Person{}
	}
	src, err := encode(f)
	if err != nil {
		return nil, fmt.Errorf("people: %s: %w", name, err)
	}
	return build(f, src, name)
}

// Merge joins directories into one, named name: a person in several is
// joined by name (their roles together, each handle from whichever gives
// it), and so is a role. A handle two of them give differently (two token
// hashes for one person, two Slack channels for one role) is an error
// naming both sources, as is a handle two people share. Nil directories
// are skipped; merging none gives nil (no directory).
func Merge(name string, dirs ...*Directory) (*Directory, error) {
	var (
		f       file
		in      []*Directory
		byName  = map[string]int{}
		byRole  = map[string]int{}
		pSource = map[string]string{}
		rSource = map[string]string{}
	)
	for _, d := range dirs {
		if d == nil {
			continue
		}
		in = append(in, d)
		for _, p := range d.people {
			i, ok := byName[p.Name]
			if !ok {
				byName[p.Name] = len(f.People)
				p.Roles = slices.Clone(p.Roles)
				f.People = append(f.People, p)
				pSource[p.Name] = d.name
				continue
			}
			q := &f.People[i]
			for _, r := range p.Roles {
				if !slices.Contains(q.Roles, r) {
					q.Roles = append(q.Roles, r)
				}
			}
			for _, h := range []struct {
				what     string
				mine, it *string
			}{{"tokenSha256", &q.TokenSHA256, &p.TokenSHA256}, {"slack", &q.Slack, &p.Slack}, {"email", &q.Email, &p.Email}, {"teams", &q.Teams, &p.Teams}} {
				if err := join(h.mine, *h.it); err != nil {
					return nil, fmt.Errorf("people: %s: person %s has one %s in %s and another in %s; keep one (edit either, or drop the older file once `interlock people import` has moved it)", name, p.Name, h.what, pSource[p.Name], d.name)
				}
			}
			if err := joinAddresses(&q.Addresses, p.Addresses); err != nil {
				return nil, fmt.Errorf("people: %s: person %s has one %s address in %s and another in %s; keep one", name, p.Name, err, pSource[p.Name], d.name)
			}
		}
		for _, r := range d.roles {
			i, ok := byRole[r.Name]
			if !ok {
				byRole[r.Name] = len(f.Roles)
				f.Roles = append(f.Roles, r)
				rSource[r.Name] = d.name
				continue
			}
			q := &f.Roles[i]
			for _, h := range []struct {
				what     string
				mine, it *string
			}{{"slack", &q.Slack, &r.Slack}, {"email", &q.Email, &r.Email}, {"teams", &q.Teams, &r.Teams}} {
				if err := join(h.mine, *h.it); err != nil {
					return nil, fmt.Errorf("people: %s: role %s has one %s in %s and another in %s; keep one", name, r.Name, h.what, rSource[r.Name], d.name)
				}
			}
			if err := joinAddresses(&q.Addresses, r.Addresses); err != nil {
				return nil, fmt.Errorf("people: %s: role %s has one %s address in %s and another in %s; keep one", name, r.Name, err, rSource[r.Name], d.name)
			}
		}
	}
	switch len(in) {
	case 0:
		return nil, nil
	case 1:
		return in[0], nil
	}
	return New(name, f.People, f.Roles)
}

// join sets *mine to it when *mine is empty; a different value is an
// error.
func join(mine *string, it string) error {
	switch {
	case it == "" || *mine == it:
	case *mine == "":
		*mine = it
	default:
		return fmt.Errorf("conflict")
	}
	return nil
}

// joinAddresses adds the addresses of it to *mine, which it clones
// first; an address on a channel the two give differently is an error
// naming the channel.
func joinAddresses(mine *map[string]string, it map[string]string) error {
	if len(it) == 0 {
		return nil
	}
	*mine = maps.Clone(*mine)
	if *mine == nil {
		*mine = map[string]string{}
	}
	for _, ch := range slices.Sorted(maps.Keys(it)) {
		v := (*mine)[ch]
		if err := join(&v, it[ch]); err != nil {
			return errors.New(ch)
		}
		(*mine)[ch] = v
	}
	return nil
}

// encode is f's YAML, as a directory file holds it.
func encode(f file) ([]byte, error) {
	return yaml.Marshal(f)
}

func clonePeople(ps []Person) []Person {
	out := slices.Clone(ps)
	for i := range out {
		out[i].Roles, out[i].Addresses = slices.Clone(out[i].Roles), maps.Clone(out[i].Addresses)
	}
	return out
}
