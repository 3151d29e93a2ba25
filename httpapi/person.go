package httpapi

import (
	"slices"

	"github.com/interlockhq/interlock/authority"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/protocol"
)

// Lookup returns the caller called name, if the file holds one.
func (a *AuthFile) Lookup(name string) (Caller, bool) {
	p, ok := a.Directory().Person(name)
	if !ok {
		return Caller{}, false
	}
	return Caller{Name: p.Name, Method: protocol.AuthLink, Roles: slices.Clone(p.Roles)}, true
}

// Person returns who a signed link speaks for (a decision link's
// person, a callback URL's caller), authenticated by the link, with the
// roles they hold now: from
// the directory of people when dir gives one, else from the auth file;
// without either, only LocalCaller is someone, holding every role. ok
// is false for someone no longer there: their links stop working.
func Person(dir func() *people.Directory, auth *AuthFile, name string) (Caller, bool) {
	if dir != nil {
		if d := dir(); d != nil {
			if p, ok := d.Person(name); ok {
				return Caller{Name: p.Name, Method: protocol.AuthLink, Roles: slices.Clone(p.Roles)}, true
			}
			if auth == nil {
				return Caller{}, false
			}
		}
	}
	if auth != nil {
		_, _ = auth.Refresh()
		return auth.Lookup(name)
	}
	if name == LocalCaller {
		c := authority.Local(LocalCaller)
		c.Method = protocol.AuthLink
		return c, true
	}
	return Caller{}, false
}
