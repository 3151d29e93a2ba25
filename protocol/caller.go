package protocol

import "strings"

// AuthMethod says how the sender of a command was authenticated: what
// vouches for the name the audit records. A surface that authenticated a
// person or an agent (the HTTP API, the inbox, a decision link, Slack)
// vouches for them with its method; a command no surface vouched for
// carries only what NATS itself knows of its sender.
type AuthMethod string

// How a caller was authenticated.
const (
	// AuthToken: an HTTP bearer token of the directory of people (the
	// HTTP API, the MCP server over HTTP).
	AuthToken AuthMethod = "token"
	// AuthSession: the inbox's sign-in, a bearer token kept in a cookie.
	AuthSession AuthMethod = "session"
	// AuthLink: a signed single-use link bound to one person and one
	// request (a decision link mailed to them), or a callback URL handed to
	// a system, which acts as the person who asked for it.
	AuthLink AuthMethod = "link"
	// AuthSlack: a Slack user, by a request Slack signed.
	AuthSlack AuthMethod = "slack"
	// AuthTeams: a Microsoft Teams account.
	AuthTeams AuthMethod = "teams"
	// AuthMCP: an MCP client of the deployment's MCP server or gateway,
	// started by an operator for the person or agent it names.
	AuthMCP AuthMethod = "mcp"
	// AuthLocal: no directory of people is in force; the caller is the
	// local user on a loopback listener, who holds every role.
	AuthLocal AuthMethod = "local"
	// AuthRoleSubject: a NATS sender whose server permissions let it
	// publish on an approver role's subject (<prefix>.in.<flow>.resume.<role>).
	// The role is authenticated, not the person: every sender on the
	// subject is one caller, nats:<role>.
	AuthRoleSubject AuthMethod = "nats-role"
	// AuthNATS: a NATS sender no service of the deployment vouched for,
	// on a subject that names no role. Where callers are identified, a
	// name it types is a label, never an identity.
	AuthNATS AuthMethod = "nats"
	// AuthServer: Interlock itself (a deadline's policy, a reminder).
	AuthServer AuthMethod = "server"
	// AuthService: a service of the deployment vouched for the caller
	// without saying how it authenticated them (a vouch of an earlier
	// version, or a program that embeds Interlock and vouches itself).
	AuthService AuthMethod = "service"
)

// Vouched reports whether m is a method a service of the deployment
// vouches for (it authenticated the caller itself).
func (m AuthMethod) Vouched() bool {
	switch m {
	case AuthToken, AuthSession, AuthLink, AuthSlack, AuthTeams, AuthMCP, AuthLocal, AuthService:
		return true
	}
	return false
}

// Known reports whether m is a method of this version. A vouch naming
// another is refused.
func (m AuthMethod) Known() bool {
	return m.Vouched() || m == AuthRoleSubject || m == AuthNATS || m == AuthServer
}

// SenderPrefix begins the name of a caller that is a NATS sender, not a
// person: nats:<role> for a role subject's senders, nats:<source> for
// others. A person's name never holds a colon, so a sender is never taken
// for a person.
const SenderPrefix = "nats:"

// IsSender reports whether name names a NATS sender rather than a person
// or an agent of the directory.
func IsSender(name string) bool { return strings.HasPrefix(name, SenderPrefix) }

// AllRoles, among a vouched caller's roles, stands for every role: the
// local user's, where no directory of people is in force. Where callers are
// identified it stands for none.
const AllRoles = "*"

// Caller is who sent a command, as the deployment knows them: the name
// the audit records, how they were authenticated, and the approver roles
// they hold.
type Caller struct {
	// Name is the caller: a person or an agent of the directory of
	// people, the local user, or a NATS sender (nats:...).
	Name string `json:"name"`
	// Method is how the caller was authenticated.
	Method AuthMethod `json:"method"`
	// Roles are the approver roles the caller holds, where Method
	// authenticates roles.
	Roles []string `json:"roles,omitempty"`
}
