package bus

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/interlockhq/interlock/wire"
)

// Identities of the embedded server when no configuration file sets up
// authentication (see [ServerConfig]).
const (
	// DefaultWorkersUser is the user Interlock's own workers connect as.
	// Without a configuration file its password is random, made at start
	// and held in memory only; it has every right.
	DefaultWorkersUser = "workers"
	// AnonymousUser is the user of every client that connects without
	// credentials. It may do what a bot, an agent service or the nats CLI
	// needs to use Interlock, and nothing else: see [ClientPermissions].
	AnonymousUser = "anonymous"
)

// WorkerInboxPrefix is the prefix of the reply subjects of Interlock's
// workers ("_INBOX_interlock"). Clients may subscribe to "_INBOX.>" for
// their own replies; the workers' replies (the resume-token secret, pulled
// commands, checkpoints) go to subjects outside it.
func WorkerInboxPrefix(n wire.Names) string { return "_INBOX_" + n.Prefix }

// readStream lists the JetStream API subjects that read a stream: its
// info, message gets, direct gets, and ordered or ephemeral consumers
// (create, info, pull, flow control and acks). It does not include
// deleting consumers, nor anything that changes the stream.
func readStream(stream string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.CONSUMER.CREATE." + stream,
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.INFO." + stream + ".*",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".*",
		"$JS.FC." + stream + ".>",
		"$JS.ACK." + stream + ".>",
	}
}

// kvStream is the stream behind a key-value bucket.
func kvStream(bucket string) string { return "KV_" + bucket }

// ClientPermissions are the rights of [AnonymousUser], the user of
// clients that connect to the embedded server without credentials.
//
// It may publish commands (<prefix>.in.>) with JetStream acknowledgements;
// read events (subscribe to <prefix>.ev.> and read the events stream), the
// audit records (which hold no token, answer or argument), dead letters,
// checkpoints (<prefix>_runs), the pending index (<prefix>_pending) and
// the live configuration (<prefix>_config): stream info, direct and message gets, ordered and
// ephemeral consumers, key listing and watching; see the inbound stream's
// and consumers' info (backlog); and receive replies on _INBOX.>.
//
// It may not: read the keys bucket (<prefix>_keys) in any way; write or
// delete an entry of any bucket; publish events, audit records or dead
// letters; publish an expire command or a deadline (the server fires
// deadlines); create, update, delete or purge a stream; delete a consumer;
// read the inbound stream's messages (other clients' commands, resume
// tokens included) or pull from the workers' consumer; or read the
// workers' replies.
func ClientPermissions(n wire.Names) *server.Permissions {
	pub := []string{
		n.Prefix + ".in.>",
		"$JS.API.INFO",
		"$JS.API.STREAM.INFO." + n.InStream(),
		"$JS.API.CONSUMER.INFO." + n.InStream() + ".*",
	}
	for _, s := range []string{n.EventStream(), n.AuditStream(), n.DeadLetterStream(), kvStream(n.RunsBucket()), kvStream(n.PendingBucket()), kvStream(n.ConfigBucket())} {
		pub = append(pub, readStream(s)...)
	}
	keys := kvStream(n.KeysBucket())
	return &server.Permissions{
		Publish: &server.SubjectPermission{
			Allow: pub,
			// Nothing above allows these; the denials say so to a reader of
			// the server's configuration and survive a widened allow list.
			Deny: []string{
				"$JS.API.*.*." + keys, "$JS.API.*.*." + keys + ".>",
				"$JS.API.*.*.*." + keys, "$JS.API.*.*.*." + keys + ".>",
				"$KV.>",
				n.Prefix + ".ev.>", n.Prefix + ".audit.>", n.Prefix + ".dlq.>",
				// Deadlines are the server's to fire.
				n.Prefix + ".in.*.expire", n.Prefix + ".schedule.>",
			},
		},
		Subscribe: &server.SubjectPermission{
			Allow: []string{"_INBOX.>", n.Prefix + ".ev.>", n.Prefix + ".audit.>", n.Prefix + ".dlq.>"},
			Deny:  []string{"$KV." + n.KeysBucket() + ".>"},
		},
	}
}

// defaultIdentities adds the workers user (every right, with password
// workers or a random one) and the restricted anonymous user to opts, and
// returns the workers' password.
func defaultIdentities(opts *server.Options, n wire.Names, workers string) (string, error) {
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
	opts.Users = []*server.User{
		{Username: DefaultWorkersUser, Password: string(workersHash)},
		{Username: AnonymousUser, Permissions: ClientPermissions(n)},
	}
	opts.NoAuthUser = AnonymousUser
	return workers, nil
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

// isLoopback reports whether host reaches this machine only.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
