// Package people is Interlock's directory of the people who decide, and
// of their roles: each person's name (the approver the audit records),
// roles, and handles on every channel (the SHA-256 of an HTTP bearer
// token, a Slack user id, an e-mail address, a Teams account), and each
// role's own channels (a Slack channel, a mailing address, a Teams
// Workflows URL).
//
// A directory is YAML, kept in a file and in the configuration bucket
// (key [Key]); every process watches the key and applies a new value
// without a restart, and a value that does not parse is refused while the
// previous one stays.
//
//	people:
//	  - name: ann@example.com
//	    roles: [supervisor]
//	    tokenSha256: 9f86d0…
//	    slack: U012AB3CD
//	    email: ann@example.com
//	roles:
//	  - name: supervisor
//	    slack: C0REFUNDS
//	    email: supervisors@example.com
package people

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/mail"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Key is the key of the directory's YAML in the configuration bucket.
const Key = "people"

// MaxNameLen is the longest name of a person or a role.
const MaxNameLen = 128

// Person is someone who may decide.
type Person struct {
	// Name is the approver the audit records for the person's decisions
	// (ann@example.com): 1 to MaxNameLen of A-Z a-z 0-9 . _ @ -, unique.
	Name string `yaml:"name" json:"name"`
	// Roles are the approver roles the person holds; none lets them
	// answer questions only.
	Roles []string `yaml:"roles,omitempty" json:"roles,omitempty"`
	// TokenSHA256 is the hex SHA-256 of the person's HTTP bearer token
	// (never the token), if they use the HTTP API or the inbox.
	TokenSHA256 string `yaml:"tokenSha256,omitempty" json:"tokenSha256,omitempty"`
	// Slack is the person's Slack user id (U012AB3CD), if they decide
	// in Slack.
	Slack string `yaml:"slack,omitempty" json:"slack,omitempty"`
	// Email is the address mail for the person goes to.
	Email string `yaml:"email,omitempty" json:"email,omitempty"`
	// Teams is the person's Microsoft Teams account (their user
	// principal name), mentioned in the cards of a role's channel.
	Teams string `yaml:"teams,omitempty" json:"teams,omitempty"`
	// Addresses are the person's addresses on other channels, keyed by
	// the channel's name: a channel added later reads its own key, and
	// no field of Person is added for it. Slack, Email and Teams are the
	// keys slack, mail and teams, which may be written here too.
	Addresses map[string]string `yaml:"addresses,omitempty" json:"addresses,omitempty"`
}

// Holds reports whether the person holds role.
func (p Person) Holds(role string) bool { return slices.Contains(p.Roles, role) }

// Address is the person's address on the channel called channel (mail,
// slack, teams, or any other channel's name), "" when they have none.
func (p Person) Address(channel string) string {
	if f := p.known(channel); f != nil {
		return *f
	}
	return p.Addresses[channel]
}

// known is the field of a channel Person has a field of, nil for another.
func (p *Person) known(channel string) *string {
	switch channel {
	case ChannelMail:
		return &p.Email
	case ChannelSlack:
		return &p.Slack
	case ChannelTeams:
		return &p.Teams
	}
	return nil
}

// Names of the channels whose addresses have fields of their own in
// [Person] and [Role].
const (
	ChannelMail  = "mail"
	ChannelSlack = "slack"
	ChannelTeams = "teams"
)

// MaxAddressLen is the longest address on a channel.
const MaxAddressLen = 2048

// Role is an approver role's own channels, where what reaches the role
// (and not a named person) goes.
type Role struct {
	// Name is the role (supervisor), a subject token.
	Name string `yaml:"name" json:"name"`
	// Slack is the id of the channel the role's approvals are posted in.
	Slack string `yaml:"slack,omitempty" json:"slack,omitempty"`
	// Email is a mailing address of the role (supervisors@example.com),
	// mailed besides the role's holders.
	Email string `yaml:"email,omitempty" json:"email,omitempty"`
	// Teams is the Workflows (incoming webhook) URL of the Teams channel
	// the role's interrupts are posted in. It is a credential: it lives
	// in the bucket only workers and administrators read.
	Teams string `yaml:"teams,omitempty" json:"teams,omitempty"`
	// Addresses are the role's addresses on other channels, keyed by the
	// channel's name, as [Person.Addresses].
	Addresses map[string]string `yaml:"addresses,omitempty" json:"addresses,omitempty"`
}

// Address is the role's own address on the channel called channel, ""
// when it has none.
func (r Role) Address(channel string) string {
	if f := r.known(channel); f != nil {
		return *f
	}
	return r.Addresses[channel]
}

// known is the field of a channel Role has a field of, nil for another.
func (r *Role) known(channel string) *string {
	switch channel {
	case ChannelMail:
		return &r.Email
	case ChannelSlack:
		return &r.Slack
	case ChannelTeams:
		return &r.Teams
	}
	return nil
}

// addresses moves the entries of as for a channel with a field of its own
// (known) into that field, and checks the others: a channel's name is a
// subject token, an address 1 to MaxAddressLen bytes without control
// characters. It returns what is wrong, naming where.
func addresses(as map[string]string, known func(string) *string, where string) error {
	for ch, addr := range as {
		if err := CheckRole(ch); err != nil {
			return fmt.Errorf("%s: addresses: channel %q: use a channel's name (mail, slack, teams, webpush, ...)", where, ch)
		}
		if addr == "" || len(addr) > MaxAddressLen || strings.IndexFunc(addr, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 {
			return fmt.Errorf("%s: addresses: the %s address must be 1 to %d bytes without control characters", where, ch, MaxAddressLen)
		}
		f := known(ch)
		if f == nil {
			continue
		}
		if *f != "" && *f != addr {
			return fmt.Errorf("%s: addresses.%s and %s give two addresses; keep one", where, ch, fieldName(ch))
		}
		*f = addr
		delete(as, ch)
	}
	return nil
}

// fieldName is the YAML key of the field of a channel with one.
func fieldName(channel string) string {
	if channel == ChannelMail {
		return "email"
	}
	return channel
}

// Directory is a parsed directory: who is who, and each role's channels.
// It is immutable, and safe for concurrent use. A nil *Directory is no
// directory: it knows nobody, and its lookups find nothing.
type Directory struct {
	source []byte
	name   string
	people []Person
	roles  []Role

	byName  map[string]int
	byHash  map[[sha256.Size]byte]int
	bySlack map[string]int
	byEmail map[string]int
	byRole  map[string]int
	holders map[string][]int
}

// file is a directory's YAML.
type file struct {
	People []Person `yaml:"people"`
	Roles  []Role   `yaml:"roles"`
}

// Empty is a directory of nobody.
func Empty() *Directory {
	d, _ := Parse([]byte("people: []\n"), "no directory")
	return d
}

// Parse reads a directory's YAML. name names its source in errors (a
// file, or "kv interlock_config people"). It refuses unknown fields, a
// name or a handle that two people share, a role that is not a subject
// token, a token hash that is not 64 hex digits, and an address that is
// not one.
func Parse(b []byte, name string) (*Directory, error) {
	var f file
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		err = withoutValues(err)
		return nil, fmt.Errorf("people: %s: %w; a directory is YAML with a list `people` of {name, roles, tokenSha256, slack, email, teams, addresses} and a list `roles` of {name, slack, email, teams, addresses}", name, err)
	}
	return build(f, b, name)
}

// build checks f, parsed from source, and indexes it.
func build(f file, source []byte, name string) (*Directory, error) {
	d := &Directory{source: bytes.Clone(source), name: name, people: f.People, roles: f.Roles,
		byName: map[string]int{}, byHash: map[[sha256.Size]byte]int{}, bySlack: map[string]int{},
		byEmail: map[string]int{}, byRole: map[string]int{}, holders: map[string][]int{}}
	for i := range d.people {
		p := &d.people[i]
		where := fmt.Sprintf("people: %s, person %d", name, i+1)
		if err := CheckName(p.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		where += " (" + p.Name + ")"
		p.Addresses = maps.Clone(p.Addresses)
		if err := addresses(p.Addresses, p.known, where); err != nil {
			return nil, err
		}
		if len(p.Addresses) == 0 {
			p.Addresses = nil
		}
		if j, ok := d.byName[p.Name]; ok {
			return nil, fmt.Errorf("%s: the name is also person %d's; names are unique", where, j+1)
		}
		d.byName[p.Name] = i
		for _, r := range p.Roles {
			if err := CheckRole(r); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if !slices.Contains(d.holders[r], i) {
				d.holders[r] = append(d.holders[r], i)
			}
		}
		if p.TokenSHA256 != "" {
			p.TokenSHA256 = strings.ToLower(p.TokenSHA256)
			h, err := hex.DecodeString(p.TokenSHA256)
			if err != nil || len(h) != sha256.Size {
				return nil, fmt.Errorf("%s: tokenSha256 must be the 64 hex digits of the token's SHA-256; `interlock people add` writes it", where)
			}
			var k [sha256.Size]byte
			copy(k[:], h)
			if j, ok := d.byHash[k]; ok {
				return nil, fmt.Errorf("%s: tokenSha256 is also %s's; everyone needs a token of their own (`interlock people rotate-token`)", where, d.people[j].Name)
			}
			d.byHash[k] = i
		}
		if p.Slack != "" {
			if !slackID.MatchString(p.Slack) {
				return nil, fmt.Errorf("%s: slack %q is not a Slack user id such as U012AB3CD (their profile, More, Copy member ID)", where, p.Slack)
			}
			if j, ok := d.bySlack[p.Slack]; ok {
				return nil, fmt.Errorf("%s: Slack user %s is also %s's", where, p.Slack, d.people[j].Name)
			}
			d.bySlack[p.Slack] = i
		}
		if p.Email != "" {
			addr, err := checkAddress(p.Email)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			p.Email = addr
			k := strings.ToLower(addr)
			if j, ok := d.byEmail[k]; ok {
				return nil, fmt.Errorf("%s: e-mail %s is also %s's", where, addr, d.people[j].Name)
			}
			d.byEmail[k] = i
		}
		if p.Teams != "" {
			upn, err := checkAddress(p.Teams)
			if err != nil {
				return nil, fmt.Errorf("%s: teams: %w (a Teams account is its user principal name)", where, err)
			}
			p.Teams = upn
		}
	}
	for i := range d.roles {
		r := &d.roles[i]
		where := fmt.Sprintf("people: %s, role %d", name, i+1)
		if err := CheckRole(r.Name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if _, ok := d.byRole[r.Name]; ok {
			return nil, fmt.Errorf("%s (%s): the role is listed twice", where, r.Name)
		}
		d.byRole[r.Name] = i
		r.Addresses = maps.Clone(r.Addresses)
		if err := addresses(r.Addresses, r.known, fmt.Sprintf("%s (%s)", where, r.Name)); err != nil {
			return nil, err
		}
		if len(r.Addresses) == 0 {
			r.Addresses = nil
		}
		if r.Slack != "" && !slackID.MatchString(r.Slack) {
			return nil, fmt.Errorf("%s (%s): slack %q is not a Slack channel id such as C0123ABCD (channel details, bottom of the About tab)", where, r.Name, r.Slack)
		}
		if r.Email != "" {
			addr, err := checkAddress(r.Email)
			if err != nil {
				return nil, fmt.Errorf("%s (%s): %w", where, r.Name, err)
			}
			r.Email = addr
		}
		if r.Teams != "" && !strings.HasPrefix(r.Teams, "https://") {
			return nil, fmt.Errorf("%s (%s): teams must be the https:// URL of the channel's Workflows webhook", where, r.Name)
		}
	}
	return d, nil
}

// slackID is a Slack user or channel id: checked, so that a mention
// built from it holds nothing else.
var slackID = regexp.MustCompile(`^[A-Z0-9]{2,64}$`)

// quoted is a value the YAML decoder quotes in its errors.
var quoted = regexp.MustCompile("`[^`]*`")

// withoutValues is err with the values the YAML decoder quotes left out:
// a value in the wrong place may be a token's hash or a Teams URL, and the
// error is logged.
func withoutValues(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	out := &yaml.TypeError{Errors: make([]string, len(te.Errors))}
	for i, e := range te.Errors {
		out.Errors[i] = quoted.ReplaceAllString(e, "a value")
	}
	return out
}

// checkAddress returns the bare address of s, or why it is not one.
func checkAddress(s string) (string, error) {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || strings.ContainsAny(a.Address, "\r\n") {
		return "", fmt.Errorf("e-mail %q is not an address such as ann@example.com", s)
	}
	return a.Address, nil
}

// CheckName reports whether s is a valid person name: 1 to MaxNameLen of
// A-Z a-z 0-9 . _ @ -.
func CheckName(s string) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("name %q: use 1 to %d of A-Z a-z 0-9 . _ @ -", s, MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._@-", c) >= 0 {
			continue
		}
		return fmt.Errorf("name %q has %q at byte %d: use only A-Z a-z 0-9 . _ @ -", s, c, i)
	}
	return nil
}

// CheckRole reports whether s is a valid approver role: a subject token of
// 1 to MaxNameLen of A-Z a-z 0-9 _ -.
func CheckRole(s string) error {
	if s == "" || len(s) > MaxNameLen {
		return fmt.Errorf("role %q: use 1 to %d of A-Z a-z 0-9 _ -", s, MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			continue
		}
		return fmt.Errorf("role %q has %q at byte %d: use only A-Z a-z 0-9 _ -", s, c, i)
	}
	return nil
}

// Source is the YAML the directory was parsed from.
func (d *Directory) Source() []byte {
	if d == nil {
		return nil
	}
	return bytes.Clone(d.source)
}

// Name names where the directory came from.
func (d *Directory) Name() string {
	if d == nil {
		return "no directory"
	}
	return d.name
}

// People are everyone in the directory, in its order.
func (d *Directory) People() []Person {
	if d == nil {
		return nil
	}
	return slices.Clone(d.people)
}

// Roles are the roles the directory gives channels to, in its order.
func (d *Directory) Roles() []Role {
	if d == nil {
		return nil
	}
	return slices.Clone(d.roles)
}

// Len is how many people the directory holds.
func (d *Directory) Len() int {
	if d == nil {
		return 0
	}
	return len(d.people)
}

// Person returns the person named name.
func (d *Directory) Person(name string) (Person, bool) {
	if d == nil {
		return Person{}, false
	}
	return d.at(d.byName, name)
}

// Role returns role's channels; a role the directory does not list has
// none (and ok false).
func (d *Directory) Role(name string) (Role, bool) {
	if d == nil {
		return Role{Name: name}, false
	}
	i, ok := d.byRole[name]
	if !ok {
		return Role{Name: name}, false
	}
	return d.roles[i], true
}

// Holders are the people who hold role, in the directory's order.
func (d *Directory) Holders(role string) []Person {
	if d == nil {
		return nil
	}
	out := make([]Person, 0, len(d.holders[role]))
	for _, i := range d.holders[role] {
		out = append(out, d.people[i])
	}
	return out
}

// ByToken returns the person whose bearer token is token, comparing its
// hash in constant time.
func (d *Directory) ByToken(token string) (Person, bool) {
	if d == nil || token == "" {
		return Person{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for k, i := range d.byHash {
		if subtle.ConstantTimeCompare(k[:], sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Person{}, false
	}
	p := d.people[found]
	p.Roles = slices.Clone(p.Roles)
	return p, true
}

// BySlack returns the person with Slack user id id.
func (d *Directory) BySlack(id string) (Person, bool) {
	if d == nil {
		return Person{}, false
	}
	return d.at(d.bySlack, id)
}

// ByEmail returns the person with the e-mail address addr (matched
// without regard to case).
func (d *Directory) ByEmail(addr string) (Person, bool) {
	if d == nil {
		return Person{}, false
	}
	return d.at(d.byEmail, strings.ToLower(addr))
}

func (d *Directory) at(m map[string]int, k string) (Person, bool) {
	i, ok := m[k]
	if !ok {
		return Person{}, false
	}
	p := d.people[i]
	p.Roles, p.Addresses = slices.Clone(p.Roles), maps.Clone(p.Addresses)
	return p, true
}

// Reach returns who an interrupt reaches: its assignees when it names
// some (a name the directory does not know is skipped), else the holders
// of its roles; and the roles whose own channels it reaches (every role
// of an interrupt without assignees). Each person appears once.
// Copies of its people are returned, which the caller may change.
func (d *Directory) Reach(roles, assignees []string) ([]Person, []Role) {
	var out []Person
	seen := map[string]bool{}
	add := func(p Person) {
		if !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p)
		}
	}
	if len(assignees) > 0 {
		for _, a := range assignees {
			if p, ok := d.Person(a); ok {
				add(p)
			}
		}
		return out, nil
	}
	var rs []Role
	for _, r := range roles {
		for _, p := range d.Holders(r) {
			add(p)
		}
		role, _ := d.Role(r)
		rs = append(rs, role)
	}
	return out, rs
}
