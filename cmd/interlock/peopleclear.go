package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/interlockhq/interlock/bus"
	"github.com/interlockhq/interlock/people"
	"github.com/interlockhq/interlock/wire"
)

// peopleClear runs `interlock people clear`: it deletes the directory of
// people from the configuration bucket, so that serve, started again
// without --people, serves the local user on loopback. Without a NATS
// URL it opens the embedded server's data dir, which serve must not be
// running on; with one, it needs an administrator's credentials, since
// clients may not write the bucket. Processes running keep the
// directory in force: deleting it opens nothing.
func peopleClear(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("people clear", "people clear [--data-dir DIR | --nats-url URL --creds FILE]", stderr)
	cf := &clientFlags{}
	cf.register(fs)
	dataDir := fs.String("data-dir", envOr("INTERLOCK_DATA_DIR", bus.DefaultDataDir), "`dir` of the embedded server's data, when serve is stopped and no NATS URL is given (default: $INTERLOCK_DATA_DIR, else "+bus.DefaultDataDir+")")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if len(pos) != 0 {
		return usageOf("people", "people clear takes no argument, but was given %s", quoteAll(pos))
	}
	names, err := wire.NewNames(cf.prefix)
	if err != nil {
		return usageError{msg: "--prefix: " + err.Error()}
	}
	cfg, err := cf.connConfig()
	if err != nil {
		return err
	}
	where := cfg.URL
	if cf.url == "" && cf.natsContext == "" && cf.creds == "" && os.Getenv("INTERLOCK_NATS_URL") == "" && os.Getenv("NATS_URL") == "" {
		// The embedded server's data, opened here as its workers.
		srv, err := bus.StartServer(ctx, bus.ServerConfig{DataDir: *dataDir, Host: bus.DefaultHost, Port: -1, Prefix: cf.prefix})
		if err != nil {
			return fmt.Errorf("people clear: opening %s: %w; stop serve first (or give --nats-url and an administrator's --creds)", *dataDir, err)
		}
		defer srv.Shutdown()
		cfg, where = srv.WorkerConn(), *dataDir
	}
	nc, js, err := wire.Connect(ctx, cfg)
	if err != nil {
		return &exitError{code: exitUnreachable, err: err}
	}
	defer nc.Close()
	// A client without the right waits for an answer that never comes.
	ctx, cancel := context.WithTimeout(ctx, clearTimeout)
	defer cancel()
	kv, err := js.KeyValue(ctx, names.ConfigBucket())
	if err != nil {
		return fmt.Errorf("people clear: binding bucket %s at %s: %w", names.ConfigBucket(), where, err)
	}
	if _, err := kv.Get(ctx, people.Key); errors.Is(err, jetstream.ErrKeyNotFound) {
		fmt.Fprintf(stdout, "%s at %s holds no directory of people (key %s): nothing to clear.\n", names.ConfigBucket(), where, people.Key)
		return nil
	} else if err != nil {
		return fmt.Errorf("people clear: reading key %s of %s at %s: %w (only Interlock's workers and administrators may: give an administrator's --creds or --context)", people.Key, names.ConfigBucket(), where, err)
	}
	if err := kv.Delete(ctx, people.Key); err != nil {
		return fmt.Errorf("people clear: deleting key %s of %s at %s: %w (only Interlock's workers and administrators may: give an administrator's --creds or --context)", people.Key, names.ConfigBucket(), where, err)
	}
	fmt.Fprintf(stdout, "Deleted the directory of people (key %s of %s at %s). Processes running keep it in force until they stop; "+
		"start serve again without --people to serve the local user, on loopback only.\n", people.Key, names.ConfigBucket(), where)
	return nil
}

// clearTimeout bounds people clear's calls to the bucket.
const clearTimeout = 5 * time.Second
