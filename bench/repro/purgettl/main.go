// Command purgettl reproduces, with nats-server alone, an anomaly the
// network soak found (docs/reliability.md): keys of a JetStream key-value
// bucket purged with a marker TTL come back, with the values the purge
// removed, after the server is killed with SIGKILL and restarted, once the
// purge markers have expired.
//
//	go run ./bench/repro/purgettl
//	go run ./bench/repro/purgettl -sync always -keys 1000 -puts 5 -stay 10
//
// It runs one nats-server (embedded, in a child process it kills), makes
// a bucket as Interlock makes its pending index (history 1, a
// LimitMarkerTTL), and for each key puts a value (-puts times) and purges
// it with a per-message TTL (jetstream.PurgeTTL), as Interlock removes a
// run that no longer waits; after each purge (one in -stay) another key
// is put, and stays. It waits until the purge markers have expired (every
// purged key reads "not found"), kills the server with SIGKILL, starts it
// again on the same store, and reads every purged key. It prints how many
// have a value again, and exits 1 if any does. By default: one key, put
// once, purged, and one other key put after it; with fsync before every
// acknowledgement (-sync always) as well as without. nats-server's issue
// #8505 reports the same with `nats kv purge --ttl`.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// serverArg makes the command run the server: its store dir, port and
// sync mode follow.
const serverArg = "-serve-nats"

func main() {
	if len(os.Args) == 5 && os.Args[1] == serverArg {
		if err := serve(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fmt.Fprintln(os.Stderr, "purgettl:", err)
			os.Exit(1)
		}
		return
	}
	keys := flag.Int("keys", 1, "keys put and purged")
	puts := flag.Int("puts", 1, "values put on each key before its purge")
	stay := flag.Int("stay", 1, "after one purged key in this many, another key is put, and stays (0: none, and nothing comes back)")
	ttl := flag.Duration("ttl", 5*time.Second, "the purge markers' TTL, and the bucket's LimitMarkerTTL (at least 1s)")
	sync := flag.String("sync", "lazy", "the server's sync: lazy (nats-server's default) or always (fsync before every acknowledgement)")
	flag.Parse()
	if *sync != "lazy" && *sync != "always" {
		fmt.Fprintln(os.Stderr, "purgettl: -sync is lazy or always")
		os.Exit(2)
	}
	back, err := run(*keys, *puts, *stay, *ttl, *sync, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "purgettl:", err)
		os.Exit(1)
	}
	if back > 0 {
		os.Exit(1)
	}
}

// serve runs a JetStream server on 127.0.0.1:port with store dir until
// killed, and prints "ready" once it takes connections.
func serve(dir, port, sync string) error {
	p, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	s, err := server.NewServer(&server.Options{JetStream: true, StoreDir: dir, Host: "127.0.0.1", Port: p, NoSigs: true, SyncAlways: sync == "always"})
	if err != nil {
		return err
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		return errors.New("the server did not start within 30s")
	}
	fmt.Println("ready")
	select {}
}

// run does the reproduction and returns how many purged keys read a value
// after the restart.
func run(keys, puts, stay int, ttl time.Duration, sync string, out io.Writer) (int, error) {
	dir, err := os.MkdirTemp("", "purgettl-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return 0, err
	}
	srv, err := start(filepath.Join(dir, "store"), port, sync)
	if err != nil {
		return 0, err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	ctx := context.Background()
	url := "nats://127.0.0.1:" + port
	nc, err := nats.Connect(url)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "pending", History: 1, LimitMarkerTTL: ttl})
	if err != nil {
		return 0, err
	}
	for i := range keys {
		key := fmt.Sprintf("k%05d", i)
		for v := range puts {
			if _, err := kv.Put(ctx, key, []byte(fmt.Sprintf("waiting %d", v))); err != nil {
				return 0, err
			}
		}
		if err := kv.Purge(ctx, key, jetstream.PurgeTTL(ttl)); err != nil {
			return 0, err
		}
		if stay > 0 && i%stay == 0 {
			if _, err := kv.Put(ctx, fmt.Sprintf("live%05d", i), []byte("waiting")); err != nil {
				return 0, err
			}
		}
	}
	staying := 0
	if stay > 0 {
		staying = (keys + stay - 1) / stay
	}
	fmt.Fprintf(out, "put %d keys %d times each and purged them with a %s marker TTL (%d more keys stay); sync %s\n", keys, puts, ttl, staying, sync)
	// The markers expire, and every purged key reads not found.
	for deadline := time.Now().Add(ttl + time.Minute); ; {
		n, err := withValue(ctx, kv, keys)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d purged keys still read a value %s after their purge", n, ttl+time.Minute)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(ttl + time.Second) // the markers gone, not only hidden
	fmt.Fprintf(out, "every purged key reads not found; the markers have expired\n")
	_ = srv.Process.Signal(syscall.SIGKILL)
	_ = srv.Wait()
	if srv, err = start(filepath.Join(dir, "store"), port, sync); err != nil {
		return 0, err
	}
	kv, err = js.KeyValue(ctx, "pending")
	for deadline := time.Now().Add(time.Minute); err != nil && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		kv, err = js.KeyValue(ctx, "pending")
	}
	if err != nil {
		return 0, err
	}
	back, err := withValue(ctx, kv, keys)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(out, "after SIGKILL and a restart, %d of the %d purged keys read a value again\n", back, keys)
	return back, nil
}

// start starts the server in a child process and waits until it is
// ready.
func start(dir, port, sync string) (*exec.Cmd, error) {
	cmd := exec.Command(os.Args[0], serverArg, dir, port, sync)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == "ready" {
			return cmd, nil
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return nil, errors.New("the server ended before it was ready")
}

// withValue counts the purged keys that read a value.
func withValue(ctx context.Context, kv jetstream.KeyValue, keys int) (int, error) {
	n := 0
	for i := range keys {
		_, err := kv.Get(ctx, fmt.Sprintf("k%05d", i))
		switch {
		case err == nil:
			n++
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return 0, err
		}
	}
	return n, nil
}

// freePort returns a loopback port free a moment ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}
