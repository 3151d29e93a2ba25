package bus

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/interlockhq/interlock/internal/netaddr"
	"github.com/interlockhq/interlock/wire"
)

// Defaults of [ServerConfig].
const (
	DefaultHost    = "127.0.0.1"
	DefaultPort    = 4222
	DefaultDataDir = "interlock-data"
	// DefaultClusterPort is the port of the route listener of a cluster
	// node, nats-server's.
	DefaultClusterPort = 6222
	// DefaultReadyTimeout bounds how long Start waits for the server.
	DefaultReadyTimeout = 15 * time.Second
)

// ErrNoAuth: the server would listen beyond loopback with no
// authentication configured.
var ErrNoAuth = errors.New("bus: refusing to listen beyond loopback without authentication")

// ErrSharedAccount: a configuration puts client users in the account of
// Interlock's streams and buckets.
var ErrSharedAccount = errors.New("bus: refusing a configuration that puts clients in the account of Interlock's streams")

// ErrNoClusterAuth: the server would accept routes from beyond loopback
// with nothing authenticating the nodes that connect.
var ErrNoClusterAuth = errors.New("bus: refusing a cluster listener beyond loopback without route authentication")

// ServerConfig configures the embedded NATS server.
//
// Without ConfigFile, the server has two identities: Interlock's workers
// ([DefaultWorkersUser], every right, a random password held in memory and
// used by the in-process connection of [Server.WorkerConn]), and the user
// of every client without credentials ([AnonymousUser], with
// [ClientPermissions]). A ConfigFile with authentication replaces both.
type ServerConfig struct {
	// DataDir holds JetStream's files and the lock file that keeps a second
	// server off them. It decides where JetStream stores, even if ConfigFile
	// names another store_dir. Defaults to DefaultDataDir.
	DataDir string
	// Host to listen on. Overrides ConfigFile's listen host. Defaults to
	// ConfigFile's, else DefaultHost (loopback only).
	Host string
	// Port to listen on; -1 picks a free port. Overrides ConfigFile's
	// listen port. Defaults to ConfigFile's, else DefaultPort.
	Port int
	// LazyFsync lets JetStream acknowledge writes before they reach the
	// disk, syncing every two minutes as nats-server does by default. It is
	// faster, but a power cut (not a process crash) can lose acknowledged
	// checkpoints and decisions. Defaults to false: fsync before every
	// acknowledgement, whatever ConfigFile's sync_interval says.
	LazyFsync bool
	// Name is the server's name, unique in a cluster and the same across
	// restarts (JetStream knows its peers by name). Defaults to
	// ConfigFile's server_name, else, in a cluster, [DefaultNodeName] of
	// the data dir, else "interlock".
	Name string
	// Cluster, if set, makes the server one node of a NATS cluster, whose
	// nodes replicate JetStream's streams and buckets. Its fields override
	// ConfigFile's cluster block. Defaults to ConfigFile's cluster, else
	// none: a single server.
	Cluster *ClusterConfig
	// Prefix of the deployment's streams, subjects and buckets, which the
	// default identities' permissions name. Defaults to wire.DefaultPrefix.
	Prefix string
	// ConfigFile is a nats-server configuration file (accounts, users, TLS,
	// cluster, ...), read with the nats-server library. Interlock's settings
	// above are merged into it. If it configures no authentication, the
	// default identities apply. Defaults to none.
	ConfigFile string
	// WorkersUser is the user of ConfigFile that Interlock's workers
	// connect as, in process. Defaults to DefaultWorkersUser.
	WorkersUser string
	// WorkersPassword is WorkersUser's password, when ConfigFile configures
	// authentication and WorkersCreds is empty. Without ConfigFile's
	// authentication it is the password of the default workers identity,
	// so that workers in other processes can join. Defaults to a random
	// password, held in memory only, when there is no ConfigFile.
	WorkersPassword string
	// WorkersCreds is a NATS credentials file for the workers, when
	// ConfigFile authenticates with JWTs. Defaults to none.
	WorkersCreds string
	// InsecureNoAuth lets the server listen beyond loopback although no
	// authentication is configured: anyone who reaches the port may then
	// start, resume and cancel runs (though still not read the keys).
	// Defaults to false: such a server is refused with [ErrNoAuth].
	InsecureNoAuth bool
	// InsecureSharedAccount lets ConfigFile put users with restricted
	// rights in the account of Interlock's workers: any of them can then
	// write every stream and bucket of that account, checkpoints and audit
	// records included, by aiming a request's reply subject at it. Defaults
	// to false: such a configuration is refused with [ErrSharedAccount].
	InsecureSharedAccount bool
	// Logger, if set, receives the server's own log lines.
	Logger server.Logger
}

// ClusterConfig makes the embedded server a node of a cluster. Empty
// fields keep the value of the ServerConfig's ConfigFile.
type ClusterConfig struct {
	// Name of the cluster, the same on every node. Defaults to
	// ConfigFile's; one of the two is required.
	Name string
	// Host of the route listener, which the other nodes connect to.
	// Defaults to ConfigFile's, else DefaultHost (loopback only).
	Host string
	// Port of the route listener; -1 picks a free port. Defaults to
	// ConfigFile's, else DefaultClusterPort.
	Port int
	// Routes are the URLs of the nodes' route listeners
	// (nats://host:6222); this node's own may be among them, so that
	// every node can be given the same list. JetStream expects as many
	// nodes as there are routes (at least 2). Defaults to ConfigFile's.
	Routes []string
	// InsecureNoAuth lets the route listener listen beyond loopback
	// although nothing authenticates the nodes: anyone who reaches its
	// port may join the cluster and read and write every stream and
	// bucket, the resume-token secret included. Defaults to false: such a
	// server is refused with [ErrNoClusterAuth] unless ConfigFile's
	// cluster block has authorization or verifies certificates.
	InsecureNoAuth bool
}

// DefaultNodeName is the name of a cluster node without one: the host
// name and a short hash of the data dir's absolute path, stable across
// restarts and different for two nodes on one machine.
func DefaultNodeName(dataDir string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "interlock"
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return host + "-" + hex.EncodeToString(sum[:3])
}

// Server is an embedded nats-server with JetStream on file storage.
type Server struct {
	ns      *server.Server
	dir     string
	lock    *dirLock
	workers wire.ConnConfig
	auth    bool
	routes  int
}

// StartServer starts an embedded server and waits until it accepts clients.
// It fails at once if another server holds the data dir, if the listen
// address is taken, or if the server would listen beyond loopback without
// authentication (see [ServerConfig.InsecureNoAuth]).
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	names, err := wire.NewNames(cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("bus: ServerConfig.Prefix: %w", err)
	}
	dir := cmp.Or(cfg.DataDir, DefaultDataDir)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("bus: data dir %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("bus: creating data dir %q: %w", abs, err)
	}
	opts, s, err := serverOptions(cfg, names, abs)
	if err != nil {
		return nil, err
	}
	if !netaddr.IsLoopbackHost(opts.Host) && !s.auth && !cfg.InsecureNoAuth {
		return nil, fmt.Errorf("%w: %s would let anyone who reaches it start, resume and cancel runs and read their state; "+
			"give a nats-server configuration with users (--nats-config; deploy/nats-server.conf is one), "+
			"listen on 127.0.0.1, or, on a network you trust, pass --insecure-no-auth",
			ErrNoAuth, net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	}
	if opts.Cluster.Port != 0 && !netaddr.IsLoopbackHost(opts.Cluster.Host) && !hasClusterAuth(opts) && (cfg.Cluster == nil || !cfg.Cluster.InsecureNoAuth) {
		return nil, fmt.Errorf("%w: anyone who reaches %s could join the cluster and read and change every run, the resume-token secret included; "+
			"give a nats-server configuration whose cluster block has authorization or TLS with verify (--nats-config; deploy/cluster/ has one per node), "+
			"listen for routes on 127.0.0.1, or, on a network you trust, pass --insecure-cluster-no-auth",
			ErrNoClusterAuth, net.JoinHostPort(opts.Cluster.Host, strconv.Itoa(opts.Cluster.Port)))
	}
	if s.auth && !cfg.InsecureSharedAccount {
		if shared := sharedAccountUsers(opts, cmp.Or(cfg.WorkersUser, DefaultWorkersUser)); len(shared) > 0 {
			return nil, fmt.Errorf("%w: %s puts %s in the account of Interlock's workers; within one account any user that may send a request "+
				"can make the server store its reply on any subject, a checkpoint's key or an audit subject included. "+
				"Put clients in an account of their own that imports what they need (deploy/interlock-auth.conf does: accounts %s and %s), "+
				"or, on a server only trusted users reach, pass --insecure-shared-account",
				ErrSharedAccount, cfg.ConfigFile, strings.Join(shared, ", "), InterlockAccount, ClientsAccount)
		}
	}
	if s.lock, err = lockDir(abs); err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		s.lock.release()
		return nil, err
	}
	if err := moveGlobalAccountData(abs, opts, names, cmp.Or(cfg.WorkersUser, DefaultWorkersUser), cfg.Logger); err != nil {
		return fail(err)
	}
	if err := checkListen(opts.Host, opts.Port); err != nil {
		return fail(err)
	}
	if opts.Cluster.Port != 0 {
		if err := checkListen(opts.Cluster.Host, opts.Cluster.Port); err != nil {
			return fail(fmt.Errorf("%w (the cluster listener: choose another port with --cluster-listen)", err))
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return fail(fmt.Errorf("bus: configuring embedded NATS server: %w", err))
	}
	if cfg.Logger != nil {
		l := cfg.Logger
		if !s.auth {
			l = passwordlessAnonymous{l}
		}
		ns.SetLoggerV2(l, false, false, false)
	}
	go ns.Start()
	deadline := DefaultReadyTimeout
	if d, ok := ctx.Deadline(); ok {
		deadline = time.Until(d)
	}
	if !ns.ReadyForConnections(deadline) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return fail(fmt.Errorf("bus: embedded NATS server did not start on %s within %s (is the port in use? try --listen with another port)",
			net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), deadline))
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return fail(errors.New("bus: embedded NATS server started without JetStream"))
	}
	s.ns = ns
	s.workers.InProcess = ns
	return s, nil
}

// serverOptions builds the server's options from cfg (and its ConfigFile),
// and the Server's identity for the workers.
func serverOptions(cfg ServerConfig, names wire.Names, storeDir string) (*server.Options, *Server, error) {
	s := &Server{dir: storeDir, workers: wire.ConnConfig{Name: "interlock-workers", InboxPrefix: WorkerInboxPrefix(names)}}
	opts := &server.Options{}
	if cfg.ConfigFile != "" {
		var err error
		opts, err = server.ProcessConfigFile(cfg.ConfigFile)
		if err != nil {
			return nil, nil, fmt.Errorf("bus: reading nats-server configuration %s: %w", cfg.ConfigFile, err)
		}
		if opts.StoreDir != "" && filepath.Clean(opts.StoreDir) != storeDir && cfg.Logger != nil {
			cfg.Logger.Warnf("%s sets store_dir %s; JetStream stores in the data dir %s instead", cfg.ConfigFile, opts.StoreDir, storeDir)
		}
		s.auth = hasAuth(opts)
	}
	opts.Host = cmp.Or(cfg.Host, opts.Host, DefaultHost)
	opts.Port = cmp.Or(cfg.Port, opts.Port, DefaultPort)
	if err := clusterOptions(opts, cfg.Cluster); err != nil {
		return nil, nil, err
	}
	s.routes = len(opts.Routes)
	if opts.Cluster.Port != 0 {
		opts.ServerName = cmp.Or(cfg.Name, opts.ServerName, DefaultNodeName(storeDir))
	} else {
		opts.ServerName = cmp.Or(cfg.Name, opts.ServerName, "interlock")
	}
	opts.JetStream = true
	opts.StoreDir = storeDir
	opts.SyncAlways = !cfg.LazyFsync
	opts.NoSigs = true
	if !s.auth {
		password, err := defaultIdentities(opts, names, cfg.WorkersPassword)
		if err != nil {
			return nil, nil, err
		}
		s.workers.User, s.workers.Password = DefaultWorkersUser, password
		return opts, s, nil
	}
	switch {
	case cfg.WorkersCreds != "":
		s.workers.CredsFile = cfg.WorkersCreds
	case cfg.WorkersPassword != "":
		s.workers.User, s.workers.Password = cmp.Or(cfg.WorkersUser, DefaultWorkersUser), cfg.WorkersPassword
	default:
		return nil, nil, fmt.Errorf("bus: %s makes clients authenticate, and Interlock's workers have no credentials: "+
			"set INTERLOCK_WORKERS_PASSWORD to the password of its user %q (as deploy/nats-server.conf does), "+
			"or give a credentials file with --creds", cfg.ConfigFile, cmp.Or(cfg.WorkersUser, DefaultWorkersUser))
	}
	return opts, s, nil
}

// moveGlobalAccountData moves the JetStream data an earlier version kept in
// the global account ($G) to the account the workers are in now, when that
// is another and holds nothing yet, so that an upgraded single server
// keeps its runs. A cluster node is left alone: its nodes agree on where
// each stream is, and the data must move with `nats backup` and `nats
// restore` instead (docs/operations.md).
func moveGlobalAccountData(storeDir string, opts *server.Options, n wire.Names, workers string, log server.Logger) error {
	if opts.Cluster.Port != 0 {
		return nil
	}
	account := ""
	for _, u := range opts.Users {
		if u.Username == workers && u.Account != nil {
			account = u.Account.Name
		}
	}
	if account == "" || account == server.DEFAULT_GLOBAL_ACCOUNT {
		return nil
	}
	from := filepath.Join(storeDir, "jetstream", server.DEFAULT_GLOBAL_ACCOUNT)
	to := filepath.Join(storeDir, "jetstream", account)
	if _, err := os.Stat(filepath.Join(from, "streams", n.InStream())); err != nil {
		return nil
	}
	if _, err := os.Stat(to); err == nil {
		return nil
	}
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("bus: moving the data of an earlier version from account %s to %s: %w", server.DEFAULT_GLOBAL_ACCOUNT, account, err)
	}
	if log != nil {
		log.Noticef("moved the JetStream data of an earlier version from account %s to %s", server.DEFAULT_GLOBAL_ACCOUNT, account)
	}
	return nil
}

// clusterOptions merges c into opts' cluster block, and checks that a
// cluster has a name.
func clusterOptions(opts *server.Options, c *ClusterConfig) error {
	if c != nil {
		opts.Cluster.Name = cmp.Or(c.Name, opts.Cluster.Name)
		opts.Cluster.Host = cmp.Or(c.Host, opts.Cluster.Host, DefaultHost)
		opts.Cluster.Port = cmp.Or(c.Port, opts.Cluster.Port, DefaultClusterPort)
		if len(c.Routes) > 0 {
			routes := server.RoutesFromStr(strings.Join(c.Routes, ","))
			if len(routes) != len(c.Routes) {
				return fmt.Errorf("bus: cluster routes %q: use URLs such as nats://host:%d, separated by commas", strings.Join(c.Routes, ","), DefaultClusterPort)
			}
			opts.Routes = routes
		}
	}
	if opts.Cluster.Port != 0 && opts.Cluster.Name == "" {
		return errors.New("bus: a cluster node needs the cluster's name, the same on every node: set --cluster-name")
	}
	if opts.Cluster.Port != 0 && len(opts.Routes) == 0 && len(opts.LeafNode.Remotes) == 0 {
		// nats-server would refuse JetStream only once started, and the
		// start would then time out with nothing said.
		return fmt.Errorf("bus: cluster %q has no routes, and a JetStream cluster node needs them: "+
			"set --routes to the route URL of every node, this one's included (nats://host:%d,...), the same list on every node",
			opts.Cluster.Name, DefaultClusterPort)
	}
	return nil
}

// hasClusterAuth reports whether the nodes of opts' cluster authenticate
// each other: with a route user, or with certificates the CA verifies.
func hasClusterAuth(opts *server.Options) bool {
	c := opts.Cluster
	return c.Username != "" || c.TLSConfig != nil && c.TLSConfig.ClientAuth == tls.RequireAndVerifyClientCert
}

// checkListen fails fast, with an error saying what to do, when host:port
// cannot be listened on (typically: another server holds it).
func checkListen(host string, port int) error {
	if port < 0 {
		return nil
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bus: cannot listen on %s: %w; another process (perhaps another `interlock serve`) may hold the port: stop it, or choose another port with --listen", addr, err)
	}
	return l.Close()
}

// ClientURL is the URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Name is the server's name, as its cluster knows it.
func (s *Server) Name() string { return s.ns.Name() }

// ClusterURL is the URL of the node's route listener, or "" when the
// server is not in a cluster.
func (s *Server) ClusterURL() string {
	addr := s.ns.ClusterAddr()
	if addr == nil {
		return ""
	}
	return "nats://" + addr.String()
}

// JetStreamNodes is how many JetStream nodes the server's cluster has, as
// its JetStream meta group counts them (from the configured routes until
// the nodes have met): 1 for a server that is not in a cluster.
func (s *Server) JetStreamNodes() int {
	if !s.ns.JetStreamIsClustered() {
		return 1
	}
	if info, err := s.ns.Jsz(&server.JSzOptions{}); err == nil && info.Meta != nil && info.Meta.Size > 0 {
		return info.Meta.Size
	}
	return max(2, s.routes)
}

// DataDir is the absolute path of the server's data.
func (s *Server) DataDir() string { return s.dir }

// NATS returns the embedded server, for in-process connections.
func (s *Server) NATS() *server.Server { return s.ns }

// WorkerConn says how Interlock's workers connect to the server: in
// process, as the workers' identity (see [ServerConfig]), with replies on
// subjects other clients cannot subscribe to ([WorkerInboxPrefix]). Its
// URL is the server's, for a worker in another process.
func (s *Server) WorkerConn() wire.ConnConfig {
	c := s.workers
	c.URL = s.ClientURL()
	return c
}

// Shutdown stops the server, waits for it to finish and releases the data
// dir. It is safe to call twice.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.lock.release()
}
