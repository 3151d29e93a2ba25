package bus

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/interlockhq/interlock/protocol"
	"github.com/interlockhq/interlock/wire"
)

// The NATS accounts of a deployment. Interlock's streams and buckets live
// in InterlockAccount, with its workers and nobody else but an
// administrator; every client (an agent service, a bot, an operator with
// the nats CLI) lives in ClientsAccount, which reaches Interlock only
// through what InterlockAccount shares with it ([Shares]).
//
// Two accounts, because within one account any user that may send a
// request can make the server publish a reply on any subject: a JetStream
// acknowledgement, an API response or a message copied out of a stream,
// aimed with the request's reply subject at a checkpoint's key, an audit
// subject or an event subject, is stored there as if Interlock wrote it.
// NATS checks no permission on reply subjects, nor on the subject a push
// consumer delivers to. Across accounts a reply goes back to the account
// that asked, where no stream of Interlock's listens.
const (
	InterlockAccount = "INTERLOCK"
	ClientsAccount   = "CLIENTS"
)

// Identities of the embedded server when no configuration file sets up
// authentication (see [ServerConfig]).
const (
	// DefaultWorkersUser is the user Interlock's own workers connect as, in
	// InterlockAccount. Without a configuration file its password is
	// random, made at start and held in memory only; it has every right in
	// that account.
	DefaultWorkersUser = "workers"
	// AnonymousUser is the user of every client that connects without
	// credentials, in ClientsAccount. It may do what a bot, an agent
	// service or the nats CLI needs to use Interlock, and nothing else:
	// see [ClientPermissions].
	AnonymousUser = "anonymous"
)

// WorkerInboxPrefix is the prefix of the reply subjects of Interlock's
// workers ("_INBOX_interlock"). Clients may subscribe to "_INBOX.>" for
// their own replies; the workers' replies (the resume-token secret, pulled
// commands, checkpoints) go to subjects outside it.
func WorkerInboxPrefix(n wire.Names) string { return "_INBOX_" + n.Prefix }

// ClientInboxPrefix is the reply prefix of the client user user of a
// deployment ("_INBOX_bot"): each user may subscribe only to its own, so
// that no client reads another's replies (a bot's page of the pending
// index, say). Clients connect with it as their inbox prefix (nats.go's
// nats.CustomInboxPrefix, the nats CLI's --inbox-prefix).
func ClientInboxPrefix(user string) string { return "_INBOX_" + user }

// Share is one subject InterlockAccount shares with ClientsAccount.
type Share struct {
	// Subject, possibly with wildcards.
	Subject string
	// Stream is set for a stream export: messages published on Subject in
	// InterlockAccount reach the clients' subscribers (live events).
	// Otherwise it is a service: a client's message on Subject goes to
	// InterlockAccount, and the replies come back to the client.
	Stream bool
	// Streamed is set for a service whose one request gets several
	// replies (a batched direct get).
	Streamed bool
}

// streamRead lists the JetStream API subjects that read a stream without a
// consumer: its info, and its messages by sequence or subject (a message
// get; with direct, direct gets too, single and batched). A consumer is
// never among them: a push consumer delivers to any subject of the
// account of its stream.
func streamRead(stream string, direct bool) []string {
	s := []string{"$JS.API.STREAM.INFO." + stream, "$JS.API.STREAM.MSG.GET." + stream}
	if direct {
		s = append(s, "$JS.API.DIRECT.GET."+stream, "$JS.API.DIRECT.GET."+stream+".>")
	}
	return s
}

// kvStream is the stream behind a key-value bucket.
func kvStream(bucket string) string { return "KV_" + bucket }

// readable are the streams clients may read, with whether they allow
// direct gets. The dead letters allow none: they hold clients' messages
// whole, and a direct get of one without its headers (no_hdr), aimed by
// its reply subject at an inbound subject, would send a client's old
// command again under another client's name. A message get wraps the
// message in a JSON answer instead.
func readable(n wire.Names) []struct {
	stream string
	direct bool
} {
	out := []struct {
		stream string
		direct bool
	}{
		{n.EventStream(), true}, {n.AuditStream(), true}, {n.DeadLetterStream(), false}, {n.ScheduleStream(), true},
		{kvStream(n.RunsBucket()), true}, {kvStream(n.PendingBucket()), true},
		{kvStream(n.WebhookDeliveriesBucket()), true}, {kvStream(n.WorkersBucket()), true},
	}
	for _, fs := range finishedStreams(n) {
		out = append(out, struct {
			stream string
			direct bool
		}{fs, true})
	}
	return out
}

// configReads are the JetStream API requests that read what clients need
// of the configuration bucket: its info (to bind it), and the direct get
// of the last value of the audit keys, of each flow's description and of
// the gate rules, by key. Nothing else of it: the bucket also holds the directory of people
// (token hashes, a role's Teams URL) and the webhook subscriptions (their
// secrets), which only the workers and the administrator read. A direct
// get with the key in its subject reads that key only; a message get, or
// a direct get by sequence, could read any.
func configReads(n wire.Names) []string {
	stream := kvStream(n.ConfigBucket())
	get := configGet(n)
	return []string{"$JS.API.STREAM.INFO." + stream, auditKeysRead(n), get + protocol.FlowKeyPrefix + "*", get + GateRulesKey}
}

// configGet is the start of the subject of a direct get of one key of the
// configuration bucket.
func configGet(n wire.Names) string {
	return "$JS.API.DIRECT.GET." + kvStream(n.ConfigBucket()) + ".$KV." + n.ConfigBucket() + "."
}

// auditKeysRead is the direct get of the audit keys (public keys), the
// one read of the configuration bucket every client user has: the Go
// client checks the signatures of the events that settle its commands
// with them.
func auditKeysRead(n wire.Names) string { return configGet(n) + protocol.AuditKeysKey }

// GateRulesKey is the key of the gate rules in the configuration bucket
// (gate.Key), which clients may read.
const GateRulesKey = "gate.rules"

// finishedStreams are the streams of the finished-runs index, one per
// finished status.
func finishedStreams(n wire.Names) []string {
	var out []string
	for _, status := range wire.FinishedStatuses {
		out = append(out, n.FinishedStream(status))
	}
	return out
}

// Shares are the subjects InterlockAccount shares with ClientsAccount:
// the inbound commands (which subjects each client may publish is its
// permissions' business), the live events, audit records and dead
// letters, and the JetStream API requests that read the readable streams
// and buckets and report the backlog. Nothing that creates or deletes a
// stream or a consumer, writes a bucket, or reads the inbound stream's
// messages or the keys bucket.
func Shares(n wire.Names) []Share {
	out := []Share{
		{Subject: n.Prefix + ".in.>"},
		{Subject: "$JS.API.INFO"},
		{Subject: "$JS.API.STREAM.NAMES"},
		{Subject: "$JS.API.STREAM.LIST"},
		{Subject: "$JS.API.STREAM.INFO." + n.InStream()},
		{Subject: "$JS.API.CONSUMER.NAMES." + n.InStream()},
		{Subject: "$JS.API.CONSUMER.LIST." + n.InStream()},
		{Subject: "$JS.API.CONSUMER.INFO." + n.InStream() + ".*"},
		{Subject: "$JS.API.CONSUMER.INFO." + n.ScheduleStream() + ".*"},
	}
	for _, r := range readable(n) {
		for _, s := range streamRead(r.stream, r.direct) {
			out = append(out, Share{Subject: s, Streamed: s == "$JS.API.DIRECT.GET."+r.stream})
		}
	}
	for _, s := range configReads(n) {
		out = append(out, Share{Subject: s})
	}
	for _, s := range []string{n.Prefix + ".ev.>", n.StoredEvents(), n.Prefix + ".audit.>", n.Prefix + ".dlq.>"} {
		out = append(out, Share{Subject: s, Stream: true})
	}
	return out
}

// ClientPermissions are the rights of [AnonymousUser], the user of
// clients that connect to the embedded server without credentials, in
// ClientsAccount.
//
// It may publish commands (<prefix>.in.>) with JetStream
// acknowledgements; read events (subscribe to <prefix>.ev.> and to
// <prefix>.stored.ev.>, where the events stream republishes what it
// stored, and read the events stream), the audit records (which hold no token, answer or
// argument), dead letters, deadlines, checkpoints (<prefix>_runs), the
// pending index (<prefix>_pending), the finished-runs index (the streams
// <PREFIX>_FINISHED_<STATUS>), the webhook delivery records
// (<prefix>_webhook_deliveries) and the running workers
// (<prefix>_workers): stream info, direct and message gets; the
// audit keys, flow descriptions and gate rules of the live configuration
// (<prefix>_config), by key (configReads); see the inbound
// stream's and consumers' info (backlog); and receive replies on _INBOX.>.
//
// It may not: create a consumer (a push consumer delivers anywhere in the
// account of its stream); read the keys bucket (<prefix>_keys) in any way;
// write or delete an entry of any bucket; publish events (on either
// subject), audit records,
// dead letters or deadlines; create, update, delete or purge a stream;
// read the inbound stream's messages (other clients' commands, resume
// tokens included); or read the workers' replies. Most of these do not
// even exist in ClientsAccount; the permissions say so again.
func ClientPermissions(n wire.Names) *server.Permissions {
	pub := []string{n.Prefix + ".in.>"}
	for _, s := range Shares(n) {
		if !s.Stream && s.Subject != n.Prefix+".in.>" {
			pub = append(pub, s.Subject)
		}
	}
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{
			Allow: []string{"_INBOX.>", n.Prefix + ".ev.>", n.StoredEvents(), n.Prefix + ".audit.>", n.Prefix + ".dlq.>"},
		},
	}
}

// workersPermissions are the rights of the workers' user in the deploy
// configurations: everything on Interlock's subjects, streams and buckets
// but deleting a stream and publishing stored events, and replies on
// their own prefix.
func workersPermissions(n wire.Names) *server.Permissions {
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: []string{n.Prefix + ".>", "$KV." + n.RunsBucket() + ".>", "$KV." + n.PendingBucket() + ".>",
				"$KV." + n.KeysBucket() + ".>", "$KV." + n.ConfigBucket() + ".>", "$KV." + n.LinksBucket() + ".>",
				"$KV." + n.SentBucket() + ".>", "$KV." + n.WebhookDeliveriesBucket() + ".>", "$KV." + n.WorkersBucket() + ".>",
				"$KV." + n.A2APushBucket() + ".>", "$KV." + n.A2AFollowBucket() + ".>",
				"$JS.API.>", "$JS.ACK.>", "$JS.FC.>"},
			// The stored events are the server's to publish.
			Deny: []string{"$JS.API.STREAM.DELETE.>", n.StoredEvents()},
		},
		Subscribe: &server.SubjectPermission{Allow: []string{WorkerInboxPrefix(n) + ".>", n.Prefix + ".>"}},
	}
}

// Role is a client user of the deploy configurations: what it is for, and
// its rights in ClientsAccount.
type Role struct {
	// User is the user's name.
	User string
	// About says what the user is for, in the configuration's comments.
	About []string
	// Permissions are its rights; its replies come on
	// ClientInboxPrefix(User).
	Permissions *server.Permissions
}

// Roles are the client users of the deploy configurations: agent, bot and
// operator (see docs/operations.md, Security, for the table).
func Roles(n wire.Names) []Role {
	in := func(verbs ...string) []string {
		var s []string
		for _, v := range verbs {
			s = append(s, n.Prefix+".in.*."+v)
		}
		return s
	}
	read := func(streams ...string) []string {
		var s []string
		for _, st := range streams {
			s = append(s, streamRead(st, st != n.DeadLetterStream())...)
		}
		return s
	}
	agentPub := append(in("start", "resume", "cancel"), n.GateRequest(), n.GateConsume(), n.AskRequest(), "$JS.API.INFO", auditKeysRead(n))
	agentPub = append(agentPub, read(n.EventStream(), kvStream(n.RunsBucket()))...)
	// Counts only, no entries: the Go client binds both buckets to read a checkpoint.
	agentPub = append(agentPub, "$JS.API.STREAM.INFO."+kvStream(n.PendingBucket()))

	botPub := append(in("resume", "resume.supervisor", "cancel"), "$JS.API.INFO", auditKeysRead(n))
	botPub = append(botPub, read(n.EventStream(), kvStream(n.RunsBucket()), kvStream(n.PendingBucket()))...)
	botPub = append(botPub, read(finishedStreams(n)...)...)

	opPub := []string{"$JS.API.INFO", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST",
		"$JS.API.STREAM.INFO." + n.InStream(), "$JS.API.CONSUMER.NAMES." + n.InStream(),
		"$JS.API.CONSUMER.LIST." + n.InStream(), "$JS.API.CONSUMER.INFO." + n.InStream() + ".*",
		"$JS.API.CONSUMER.INFO." + n.ScheduleStream() + ".*"}
	for _, r := range readable(n) {
		opPub = append(opPub, streamRead(r.stream, r.direct)...)
	}
	opPub = append(opPub, configReads(n)...)
	sub := func(user string, more ...string) []string {
		return append([]string{ClientInboxPrefix(user) + ".>"}, more...)
	}
	return []Role{
		{User: "agent", About: []string{
			"An agent service: start runs, answer them, cancel them, ask the tool-call",
			"gate; read the events of runs (live, and the last of a subject with a",
			"direct get), checkpoints (nats kv get) and the audit keys that sign",
			"outcomes. Never assign an approval: who decides is for people to",
			"settle, through a service that vouches for them.",
		}, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: agentPub},
			Subscribe: &server.SubjectPermission{Allow: sub("agent", n.Prefix+".ev.>", n.StoredEvents())},
		}},
		{User: "bot", About: []string{
			"A Slack bot or an inbox: answer questions and cancel runs; decide",
			"approvals for the supervisor role only (" + n.Prefix + ".in.<flow>.resume.supervisor:",
			"with authorization configured, Interlock takes approval decisions only on",
			"role subjects); read events, checkpoints, the pending index, the",
			"finished-runs index, a page at a time by batched direct get, and the",
			"audit keys that sign outcomes. Claims,",
			"releases and delegations go through the HTTP API, which vouches for the",
			"person: an assign has no role subject.",
		}, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: botPub},
			Subscribe: &server.SubjectPermission{Allow: sub("bot", n.Prefix+".ev.>", n.StoredEvents())},
		}},
		{User: "operator", About: []string{
			"An operator with the nats CLI: read every stream and bucket but the keys",
			"and the inbound commands (stream ls, stream info, stream get, kv get,",
			"consumer info) and watch events, audit records and dead letters live;",
			"change nothing. Reading through consumers (stream view, kv ls, kv",
			"history) and changing the live configuration (nats kv put",
			configPlaceholder + ") take the admin user.",
		}, Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: opPub},
			Subscribe: &server.SubjectPermission{Allow: sub("operator", n.Prefix+".ev.>", n.StoredEvents(), n.Prefix+".audit.>", n.Prefix+".dlq.>")},
		}},
	}
}

// configPlaceholder is replaced in [Role] texts by the config bucket's
// name.
const configPlaceholder = "{config}"

// defaultIdentities adds the default accounts to opts: InterlockAccount,
// with JetStream and the workers user (every right, with password workers
// or a random one), and ClientsAccount, with the restricted anonymous user,
// importing [Shares]. It returns the workers' password.
func defaultIdentities(opts *server.Options, n wire.Names, workers string) (string, error) {
	if len(opts.Accounts) > 0 {
		return "", fmt.Errorf("bus: the nats-server configuration defines accounts but no users: define the users too, " +
			"with Interlock's workers alone (or with an administrator) in the account of its streams and every client in another (deploy/interlock-auth.conf is one), or define neither")
	}
	var err error
	if workers == "" {
		if workers, err = randomPassword(); err != nil {
			return "", err
		}
	}
	// The server holds the workers' password as a bcrypt hash, as a
	// configuration file should; it is random, so the lowest cost will do.
	// The anonymous user needs none: connecting without credentials gives
	// its rights anyway.
	workersHash, err := bcrypt.GenerateFromPassword([]byte(workers), bcrypt.MinCost)
	if err != nil {
		return "", fmt.Errorf("bus: hashing the workers' password: %w", err)
	}
	var b strings.Builder
	b.WriteString("accounts {\n")
	writeInterlockAccount(&b, n, []userConf{{name: DefaultWorkersUser, password: strconv.Quote(string(workersHash))}})
	writeClientsAccount(&b, n, []userConf{{name: AnonymousUser, perms: ClientPermissions(n)}})
	b.WriteString("}\nno_auth_user: " + AnonymousUser + "\n")
	defaults := &server.Options{}
	if err := defaults.ProcessConfigString(b.String()); err != nil {
		return "", fmt.Errorf("bus: the default accounts do not parse: %w", err)
	}
	opts.Accounts, opts.Users, opts.NoAuthUser = defaults.Accounts, defaults.Users, defaults.NoAuthUser
	return workers, nil
}

// userConf is a user of a generated configuration.
type userConf struct {
	name, password string
	perms          *server.Permissions
	// permsVar names a variable holding the permissions instead.
	permsVar string
}

// writeInterlockAccount writes InterlockAccount's block: JetStream, users,
// and the exports of [Shares].
func writeInterlockAccount(b *strings.Builder, n wire.Names, users []userConf) {
	fmt.Fprintf(b, "  %s {\n    jetstream: enabled\n", InterlockAccount)
	writeUsers(b, users)
	b.WriteString("    exports: [\n")
	for _, s := range Shares(n) {
		switch {
		case s.Stream:
			fmt.Fprintf(b, "      {stream: %q, accounts: [%s]}\n", s.Subject, ClientsAccount)
		case s.Streamed:
			fmt.Fprintf(b, "      {service: %q, response: stream, accounts: [%s]}\n", s.Subject, ClientsAccount)
		default:
			fmt.Fprintf(b, "      {service: %q, accounts: [%s]}\n", s.Subject, ClientsAccount)
		}
	}
	b.WriteString("    ]\n  }\n")
}

// writeClientsAccount writes ClientsAccount's block: users, and the
// imports of [Shares].
func writeClientsAccount(b *strings.Builder, n wire.Names, users []userConf) {
	fmt.Fprintf(b, "  %s {\n", ClientsAccount)
	writeUsers(b, users)
	b.WriteString("    imports: [\n")
	for _, s := range Shares(n) {
		kind := "service"
		if s.Stream {
			kind = "stream"
		}
		fmt.Fprintf(b, "      {%s: {account: %s, subject: %q}}\n", kind, InterlockAccount, s.Subject)
	}
	b.WriteString("    ]\n  }\n")
}

func writeUsers(b *strings.Builder, users []userConf) {
	b.WriteString("    users: [\n")
	for _, u := range users {
		fmt.Fprintf(b, "      {user: %s", u.name)
		if u.password != "" {
			fmt.Fprintf(b, ", password: %s", u.password)
		}
		switch {
		case u.permsVar != "":
			fmt.Fprintf(b, ", permissions: $%s", u.permsVar)
		case u.perms != nil:
			b.WriteString(", permissions: ")
			writePermissions(b, u.perms, false)
		}
		b.WriteString("}\n")
	}
	b.WriteString("    ]\n")
}

// writePermissions writes p as a configuration block: on one line, or,
// with multiline, one subject per line.
func writePermissions(b *strings.Builder, p *server.Permissions, multiline bool) {
	list := func(s []string, indent string) string {
		q := make([]string, len(s))
		for i, v := range s {
			q[i] = strconv.Quote(v)
		}
		if !multiline || len(s) <= 2 {
			return "[" + strings.Join(q, ", ") + "]"
		}
		return "[\n" + indent + "  " + strings.Join(q, "\n"+indent+"  ") + "\n" + indent + "]"
	}
	part := func(name string, sp *server.SubjectPermission) {
		if sp == nil {
			return
		}
		if !multiline {
			fmt.Fprintf(b, "%s: {", name)
			sep := ""
			if len(sp.Allow) > 0 {
				fmt.Fprintf(b, "allow: %s", list(sp.Allow, ""))
				sep = ", "
			}
			if len(sp.Deny) > 0 {
				fmt.Fprintf(b, "%sdeny: %s", sep, list(sp.Deny, ""))
			}
			b.WriteString("}, ")
			return
		}
		fmt.Fprintf(b, "  %s: {\n", name)
		if len(sp.Allow) > 0 {
			fmt.Fprintf(b, "    allow: %s\n", list(sp.Allow, "    "))
		}
		if len(sp.Deny) > 0 {
			fmt.Fprintf(b, "    deny: %s\n", list(sp.Deny, "    "))
		}
		b.WriteString("  }\n")
	}
	if multiline {
		b.WriteString("{\n")
	} else {
		b.WriteString("{")
	}
	part("publish", p.Publish)
	part("subscribe", p.Subscribe)
	b.WriteString("}")
}

// DeployAuthConfig is deploy/interlock-auth.conf for names: the two
// accounts, with the workers and an administrator in InterlockAccount and
// the client users of [Roles] in ClientsAccount, their passwords read from
// the environment (INTERLOCK_<USER>_PASSWORD).
func DeployAuthConfig(n wire.Names) string {
	var b strings.Builder
	w := func(lines ...string) {
		for _, l := range lines {
			if l == "" {
				b.WriteString("#\n")
				continue
			}
			b.WriteString("# " + l + "\n")
		}
	}
	w("Who may do what on Interlock's streams, subjects and buckets. Generated by",
		"`go test ./bus -run TestDeployAuthConfigIsGenerated -update` from",
		"bus.DeployAuthConfig; edit that, not this file.",
		"",
		"Included by nats-server.conf and cluster/nats-*.conf, and copied into",
		"k8s/interlock.yaml and helm/nats-values.yaml (tests keep the copies",
		"equal). One user per kind of client, each with only what it needs.",
		"Passwords come from the environment, never from this file: set each",
		"INTERLOCK_*_PASSWORD below (for example to the output of `openssl rand",
		"-hex 24`) in the server's environment, and give each client its own.",
		"",
		"Two accounts. "+InterlockAccount+" holds Interlock's streams and buckets, its",
		"workers and the administrator, and nobody else: within one account, any",
		"user that may send a request can make the server publish a reply on any",
		"subject (a JetStream acknowledgement aimed at a checkpoint's key, say),",
		"and NATS checks no permission on reply subjects. "+ClientsAccount+" holds every",
		"client, and reaches Interlock only through the exports below: commands,",
		"live events, and JetStream requests that read without a consumer.",
		"",
		"Each client user receives its replies on its own inbox prefix",
		"(_INBOX_<user>): connect with it (nats --inbox-prefix _INBOX_bot,",
		"nats.CustomInboxPrefix in Go, inboxPrefix in JavaScript).",
		"",
		"The names use the default prefix `"+n.Prefix+"`. With --prefix acme, replace",
		"`"+n.Prefix+".` by `acme.`, `"+strings.ToUpper(n.Prefix)+"_` by `ACME_` and `"+n.Prefix+"_` by `acme_`.",
		"",
		"The variables are named *_PERMS: a top-level name such as OPERATOR would",
		"also be read as the server setting of the same name.")
	b.WriteString("\n")
	w("Interlock's workers (`interlock serve`): everything on Interlock's streams",
		"and buckets, the keys included, but deleting a stream. Their replies use",
		"the inbox prefix "+WorkerInboxPrefix(n)+". The HTTP API, the inbox and the Slack",
		"bridge run in `interlock serve` on this user: they, and the admin, alone",
		"claim, release and delegate approvals ("+n.Prefix+".in.<flow>.assign), vouched for",
		"the person each authenticated.")
	writeVar(&b, "WORKERS_PERMS", workersPermissions(n))
	w("An administrator: manages streams and buckets (the only user who may",
		"delete or reconfigure them), changes the live configuration, reads",
		"everything, the keys included, and may create consumers (nats stream",
		"view, nats kv ls, nats kv history).")
	writeVar(&b, "ADMIN_PERMS", &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{">"}},
		Subscribe: &server.SubjectPermission{Allow: []string{">"}},
	})
	for _, r := range Roles(n) {
		about := slices.Clone(r.About)
		for i := range about {
			about[i] = strings.ReplaceAll(about[i], configPlaceholder, n.ConfigBucket())
		}
		w(about...)
		writeVar(&b, strings.ToUpper(r.User)+"_PERMS", r.Permissions)
	}
	b.WriteString("accounts {\n")
	pw := func(u string) string { return "$INTERLOCK_" + strings.ToUpper(u) + "_PASSWORD" }
	writeInterlockAccount(&b, n, []userConf{
		{name: "workers", password: pw("workers"), permsVar: "WORKERS_PERMS"},
		{name: "admin", password: pw("admin"), permsVar: "ADMIN_PERMS"},
	})
	var clients []userConf
	for _, r := range Roles(n) {
		clients = append(clients, userConf{name: r.User, password: pw(r.User), permsVar: strings.ToUpper(r.User) + "_PERMS"})
	}
	writeClientsAccount(&b, n, clients)
	b.WriteString("}\n")
	return b.String()
}

func writeVar(b *strings.Builder, name string, p *server.Permissions) {
	b.WriteString(name + " = ")
	writePermissions(b, p, true)
	b.WriteString("\n\n")
}

func randomPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("bus: generating a password: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// hasAuth reports whether opts (read from a configuration file) make
// clients authenticate: users, nkeys, a token, JWT operators, an auth
// callout or certificates mapped to users. A no_auth_user with every right
// does not count: it lets anyone in with those rights.
func hasAuth(opts *server.Options) bool {
	if opts.NoAuthUser != "" {
		for _, u := range opts.Users {
			if u.Username == opts.NoAuthUser && u.Permissions == nil {
				return false
			}
		}
	}
	return len(opts.Users) > 0 || len(opts.Nkeys) > 0 || opts.Username != "" ||
		opts.Authorization != "" || len(opts.TrustedOperators) > 0 || len(opts.TrustedKeys) > 0 ||
		opts.AuthCallout != nil || (opts.TLSVerify && opts.TLSMap)
}

// sharedAccountUsers lists the users of opts, other than workers, that
// share workers' account with restricted rights: clients who, by aiming a
// reply at any subject of that account, could write Interlock's streams
// and buckets. A user with every right (an administrator) is not listed.
func sharedAccountUsers(opts *server.Options, workers string) []string {
	account := func(a *server.Account) string {
		if a == nil {
			return server.DEFAULT_GLOBAL_ACCOUNT
		}
		return a.Name
	}
	var mine string
	found := false
	for _, u := range opts.Users {
		if u.Username == workers {
			mine, found = account(u.Account), true
		}
	}
	if !found {
		return nil
	}
	full := func(p *server.Permissions) bool {
		return p == nil || p.Publish != nil && slices.Contains(p.Publish.Allow, ">") && len(p.Publish.Deny) == 0
	}
	var shared []string
	for _, u := range opts.Users {
		if u.Username != workers && account(u.Account) == mine && !full(u.Permissions) {
			shared = append(shared, u.Username)
		}
	}
	for _, u := range opts.Nkeys {
		if account(u.Account) == mine && !full(u.Permissions) {
			shared = append(shared, u.Nkey)
		}
	}
	return shared
}
